"""Entity checks: the answer's evidence against the ground-truth entities, and the parsed verdict.

**Identities are normalised before comparing** (all deterministic, no fuzzy matching):

- case and surrounding whitespace, quotes and backticks are ignored;
- a member-type prefix (``user:``, ``group:``, ``serviceAccount:``, ``domain:``, ``deleted:user:``,
  ...) is ignored when only one side has it; when both have one, they must agree;
- an email address stands for its Workspace primary address when the world lists it as an alias
  (``mryan@lumenanalytics.com`` is ``michael.ryan@corvid.io``), so an old-domain login and the
  current address match each other;
- an entity's label (the AWS role name beside its ARN) is accepted in place of its identifier,
  within the same vendor;
- **a person** (a HiBob ``person`` entity) may be cited from any vendor by HiBob id (when the
  evidence is HiBob's or its kind is ``person``), by work email or one of its aliases, or by exact
  display name. A display name several people share matches any of them: the world's ambiguity
  is not the agent's error, and one evidence item still matches one entity at most.

Every other entity must be cited with its own vendor.

**Counting.** Evidence items that normalise to the same (vendor, identifier) count once (the
rest are ``duplicates``). Matching is a maximum one-to-one matching between evidence and truth,
so one item cannot claim a person and that person's account at once; pairs of the same vendor
are matched first, so a cross-vendor person match only takes an item nothing else needs.
``precision`` is matched over distinct evidence (``None`` without evidence); ``recall`` is
matched over truth entities (``None`` when the truth has none).

**Verdict.** ``answer.verdict`` when set; otherwise a conservative parse of the response's first
words: a leading ``yes`` or ``no`` (after markdown and an optional ``Verdict:``/``Answer:``
label), not followed by ``/``, ``or no`` or ``and yes``. Anything else is no verdict.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner.contract import Answer, EvidenceItem
from runner.tasks.truth import Entity, TaskTruth

VerdictValue = Literal["yes", "no"]
VerdictSource = Literal["field", "response"]
_Key = tuple[str, str]  # (namespace, value): a vendor name or "person"

_PREFIX = re.compile(r"^(deleted:)?(user|group|serviceaccount|domain|principal|principalset):(.+)$")
_STRIP = " \t\r\n`'\""
_VERDICT_WINDOW = 400
_LEADING_VERDICT = re.compile(
    r"^[\s>*_#`\"'\-]*(?:(?:final\s+)?(?:verdict|answer|conclusion|short\s+answer)\s*[:\-–—]\s*[\s*_`\"']*)?"
    r"(yes|no)\b(?!\s*/|\s+or\s+(?:yes|no)\b|\s+and\s+(?:yes|no)\b)",
    re.IGNORECASE,
)


class IdentityIndex:
    """Who is who in the world: Workspace aliases and HiBob people. Build it once per world."""

    def __init__(
        self,
        aliases: dict[str, str] | None = None,
        people: Iterable[tuple[str, str, str]] = (),
    ) -> None:
        """``aliases`` maps alias email to primary email; ``people`` holds (HiBob id, display name, work email)."""
        self.aliases = {a.lower(): p.lower() for a, p in (aliases or {}).items()}
        self.person_ids: set[str] = set()
        self.by_email: dict[str, set[str]] = defaultdict(set)
        self.by_name: dict[str, set[str]] = defaultdict(set)
        for pid, name, email in people:
            self.person_ids.add(pid.lower())
            self.by_email[self.canonical_email(email)].add(pid.lower())
            self.by_name[_name(name)].add(pid.lower())

    @classmethod
    def from_connection(cls, conn: sqlite3.Connection) -> IdentityIndex:
        """Read the aliases (``gws_user_aliases``) and the people (``hibob_people``) from the snapshot."""
        aliases = dict(
            conn.execute(
                "SELECT a.alias, u.primary_email FROM gws_user_aliases AS a JOIN gws_users AS u ON u.id = a.user_id"
            )
        )
        people = conn.execute("SELECT id, display_name, email FROM hibob_people").fetchall()
        return cls(aliases, [(str(i), str(n), str(e)) for i, n, e in people])

    def canonical_email(self, email: str) -> str:
        """The primary address for ``email`` (lower-case) when it is a Workspace alias, else itself."""
        low = email.lower()
        return self.aliases.get(low, low)

    def persons(self, body: str, *, allow_id: bool) -> set[str]:
        """The HiBob ids ``body`` (normalised) may name: by id, email or display name."""
        found: set[str] = set()
        if allow_id and body in self.person_ids:
            found.add(body)
        if "@" in body:
            found |= self.by_email.get(self.canonical_email(body), set())
        found |= self.by_name.get(_name(body), set())
        return found


class EntityMatch(BaseModel):
    """One truth entity and the evidence item that matched it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    truth: Entity
    evidence: EvidenceItem


class EntityCheck(BaseModel):
    """Evidence against truth: what matched, what was missed, what was extra."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    truth_count: int
    """Ground-truth entities."""
    evidence_count: int
    """Distinct evidence items (after normalisation)."""
    duplicates: int
    """Evidence items that repeat an earlier one."""
    matched: list[EntityMatch]
    """Matched pairs, in truth order."""
    missed: list[Entity]
    """Truth entities no evidence matched."""
    extra: list[EvidenceItem]
    """Distinct evidence items that matched no truth entity."""
    precision: float | None
    """matched / evidence_count; ``None`` without evidence."""
    recall: float | None
    """matched / truth_count; ``None`` when the truth names no entity."""


class VerdictCheck(BaseModel):
    """The answer's verdict, where it came from, and whether it matches the truth."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    verdict: VerdictValue | None
    """The parsed verdict, or ``None`` when the answer gives none."""
    source: VerdictSource | None
    """``field`` (``answer.verdict``) or ``response`` (parsed from the text)."""
    expected: VerdictValue | None
    """The ground-truth verdict; ``None`` for enumeration tasks."""
    correct: bool | None
    """Whether they agree; ``None`` for enumeration tasks."""


def check_entities(truth: Sequence[Entity], evidence: Sequence[EvidenceItem], index: IdentityIndex) -> EntityCheck:
    """Match ``evidence`` one-to-one against ``truth`` after normalising identities (see the module doc)."""
    distinct: list[EvidenceItem] = []
    seen: set[tuple[str, str | None, str]] = set()
    for item in evidence:
        prefix, body = normalise(item.identifier)
        ident = (item.vendor, prefix, body)
        if ident not in seen:
            seen.add(ident)
            distinct.append(item)

    by_key: dict[_Key, list[int]] = defaultdict(list)
    truth_prefix: list[str | None] = []
    for t, entity in enumerate(truth):
        prefix, _ = normalise(entity.identifier)
        truth_prefix.append(prefix)
        for key in _truth_keys(entity, index):
            by_key[key].append(t)
    # Edges truth -> evidence, in evidence order, so the matching below is deterministic. "Direct"
    # edges join an item to an entity of its own vendor; they are matched first, so an Okta login
    # goes to the Okta account and reaches the person behind it only when nothing else can.
    direct: list[list[int]] = [[] for _ in truth]
    edges: list[list[int]] = [[] for _ in truth]
    for e, item in enumerate(distinct):
        prefix, _ = normalise(item.identifier)
        candidates = {t for key in _evidence_keys(item, index) for t in by_key.get(key, ())}
        for t in sorted(candidates):
            if prefix is None or truth_prefix[t] is None or prefix == truth_prefix[t]:
                edges[t].append(e)
                if truth[t].vendor == item.vendor:
                    direct[t].append(e)

    owner: list[int | None] = [None] * len(distinct)
    _augment_all(direct, owner)
    _augment_all(edges, owner)
    matched_truth = {t: e for e, t in enumerate(owner) if t is not None}
    matched = [EntityMatch(truth=truth[t], evidence=distinct[matched_truth[t]]) for t in sorted(matched_truth)]
    return EntityCheck(
        truth_count=len(truth),
        evidence_count=len(distinct),
        duplicates=len(evidence) - len(distinct),
        matched=matched,
        missed=[entity for t, entity in enumerate(truth) if t not in matched_truth],
        extra=[item for e, item in enumerate(distinct) if owner[e] is None],
        precision=len(matched) / len(distinct) if distinct else None,
        recall=len(matched) / len(truth) if truth else None,
    )


def parse_verdict(answer: Answer | None) -> tuple[VerdictValue | None, VerdictSource | None]:
    """The answer's verdict and its source: the ``verdict`` field, else a leading yes/no in the response."""
    if answer is None:
        return None, None
    if answer.verdict is not None:
        return answer.verdict, "field"
    # The call must open the response; looking further would only invite false readings.
    found = _LEADING_VERDICT.match(answer.response[:_VERDICT_WINDOW])
    if found is None:
        return None, None
    word = found.group(1).lower()
    return ("yes" if word == "yes" else "no"), "response"


def check_verdict(answer: Answer | None, truth: TaskTruth) -> VerdictCheck:
    """Parse the answer's verdict and compare it with the truth's (verdict tasks only)."""
    verdict, source = parse_verdict(answer)
    if truth.kind != "verdict":
        return VerdictCheck(verdict=verdict, source=source, expected=None, correct=None)
    return VerdictCheck(verdict=verdict, source=source, expected=truth.verdict, correct=verdict == truth.verdict)


def normalise(identifier: str) -> tuple[str | None, str]:
    """``(member-type prefix or None, body)``, both lower-case, e.g. ``("user", "ann@corp.example")``."""
    text = identifier.strip(_STRIP).lower()
    found = _PREFIX.match(text)
    if found is None:
        return None, text
    return (found.group(1) or "") + found.group(2), found.group(3).strip(_STRIP)


def _name(text: str) -> str:
    return " ".join(text.lower().split())


def _bodies(body: str, index: IdentityIndex) -> set[str]:
    return {body, index.canonical_email(body)} if "@" in body else {body}


def _truth_keys(entity: Entity, index: IdentityIndex) -> set[_Key]:
    _, body = normalise(entity.identifier)
    if entity.vendor == "hibob" and entity.type == "person":
        keys = {("person", body)}
        if entity.label:
            keys.add(("person", "name:" + _name(entity.label)))
        return keys
    keys = {(entity.vendor, b) for b in _bodies(body, index)}
    if entity.label:
        keys.add((entity.vendor, normalise(entity.label)[1]))
    return keys


def _evidence_keys(item: EvidenceItem, index: IdentityIndex) -> set[_Key]:
    _, body = normalise(item.identifier)
    keys: set[_Key] = {(item.vendor, b) for b in _bodies(body, index)}
    allow_id = item.vendor == "hibob" or item.kind.strip().lower() == "person"
    if allow_id:
        # Also without an index entry, so a HiBob id matches even when the world was not read.
        keys.add(("person", body))
    keys |= {("person", pid) for pid in index.persons(body, allow_id=allow_id)}
    keys.add(("person", "name:" + _name(body)))
    return keys


def _augment_all(edges: list[list[int]], owner: list[int | None]) -> None:
    """Kuhn's augmenting paths from every unmatched truth entity; ``owner[e]`` is evidence ``e``'s entity.

    Starting from an earlier matching, augmenting keeps every matched entity and item matched, so
    the second pass only adds to what the direct pass found.
    """
    matched = {t for t in owner if t is not None}

    def augment(t: int, visited: set[int]) -> bool:
        for e in edges[t]:
            if e in visited:
                continue
            visited.add(e)
            current = owner[e]
            if current is None or augment(current, visited):
                owner[e] = t
                return True
        return False

    for t in range(len(edges)):
        if t not in matched:
            augment(t, set())
