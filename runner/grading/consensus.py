"""The v1 consensus (docs/scoring.md, section 2), as pure functions over judge votes.

- **Within an epoch** the lowest non-abstaining judge grade wins; if every judge abstains, the
  epoch abstains.
- **Across epochs** the most frequent non-abstaining epoch grade wins, and a tie goes to the
  lower grade; if every epoch abstains, the task abstains.

Consensus is computed per (task, dimension). An abstaining result is returned like any other,
never dropped, so callers can count it.

The auditor's input is a VOTES.jsonl file, one JSON object per line with ``task_id``, ``epoch``,
``judge``, ``dimension`` and ``grade``. Blank lines are skipped; anything else that is not a valid
vote (bad JSON, a repeated key, a missing field, an unknown grade or dimension, an epoch that is
not a positive integer, or a second vote for the same task, epoch, judge and dimension) is
rejected with its line number rather than guessed at.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from runner.errors import GradingError
from runner.grading.grades import ABSTAIN, DIMENSIONS, Dimension, Grade, Vote, rank

VoteKey = tuple[str, int, str, Dimension]
"""What makes a vote unique: task, epoch, judge, dimension."""


class ConsensusError(GradingError):
    """The votes cannot be turned into a consensus: a malformed line or a duplicate vote.

    Attributes:
        path: the vote file, when the votes came from one.
        lines: the 1-based line numbers involved (two for a duplicate vote).
    """

    def __init__(self, message: str, *, path: str | None = None, lines: tuple[int, ...] = ()) -> None:
        self.path = path
        self.lines = lines
        where = ""
        if lines:
            where = f"line {lines[0]}"
            where = f"{path}, {where}" if path else where
        elif path:
            where = path
        super().__init__(f"{where}: {message}" if where else message)


class Consensus(BaseModel):
    """The consensus grade of one task on one dimension, with the per-epoch results behind it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    task_id: str
    """The task."""
    dimension: Dimension
    """The judged dimension."""
    grade: Grade
    """The task's consensus across epochs; ``abstain`` when every epoch abstained."""
    epochs: dict[int, Grade]
    """Each epoch's consensus across judges, keyed by epoch number in ascending order."""


def epoch_consensus(grades: Iterable[Grade]) -> Grade:
    """The consensus of the judges within one epoch: the lowest non-abstaining grade.

    Returns ``abstain`` when every grade is ``abstain`` or there are none.
    """
    real = [g for g in grades if g != ABSTAIN]
    return min(real, key=rank) if real else ABSTAIN


def task_consensus(epoch_grades: Iterable[Grade]) -> Grade:
    """The consensus across epochs: the modal non-abstaining grade, ties going to the lower grade.

    Returns ``abstain`` when every epoch abstained or there are none.
    """
    counts = Counter(g for g in epoch_grades if g != ABSTAIN)
    if not counts:
        return ABSTAIN
    # Sort key: highest count first, then lowest rank, so a tie resolves downward. Inspect AI's
    # mode reducer takes the first value seen instead, which makes the result order-dependent.
    return min(counts, key=lambda g: (-counts[g], rank(g)))


def consensus(votes: Iterable[Vote]) -> list[Consensus]:
    """Apply the v1 rules to ``votes`` and return one ``Consensus`` per (task, dimension).

    The result is sorted by task id, then by the contract's order of dimensions; it does not
    depend on the order of ``votes``.

    Raises:
        ConsensusError: when two votes share task, epoch, judge and dimension.
    """
    # (task, dimension) -> epoch -> judge -> grade
    table: dict[tuple[str, Dimension], dict[int, dict[str, Grade]]] = defaultdict(lambda: defaultdict(dict))
    for v in votes:
        judges = table[(v.task_id, v.dimension)][v.epoch]
        if v.judge in judges:
            raise ConsensusError(
                f"duplicate vote for task {v.task_id!r}, epoch {v.epoch}, judge {v.judge!r}, dimension {v.dimension}"
            )
        judges[v.judge] = v.grade

    results = []
    for (task_id, dimension), by_epoch in table.items():
        epochs = {e: epoch_consensus(by_epoch[e].values()) for e in sorted(by_epoch)}
        results.append(
            Consensus(
                task_id=task_id,
                dimension=dimension,
                grade=task_consensus(epochs.values()),
                epochs=epochs,
            )
        )
    results.sort(key=lambda c: (c.task_id, DIMENSIONS.index(c.dimension)))
    return results


def parse_votes(lines: Iterable[str], *, source: str | None = None) -> list[Vote]:
    """Parse VOTES.jsonl text, given as lines, into votes.

    ``source`` names the input in error messages. Blank lines are skipped.

    Raises:
        ConsensusError: for the first malformed line or the first duplicate vote, naming its line
            number (and, for a duplicate, the line of the first vote too).
    """
    votes: list[Vote] = []
    seen: dict[VoteKey, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        vote = _parse_line(line, number, source)
        key: VoteKey = (vote.task_id, vote.epoch, vote.judge, vote.dimension)
        if key in seen:
            raise ConsensusError(
                f"duplicate vote for task {vote.task_id!r}, epoch {vote.epoch}, judge {vote.judge!r}, "
                f"dimension {vote.dimension}; the first is on line {seen[key]}",
                path=source,
                lines=(number, seen[key]),
            )
        seen[key] = number
        votes.append(vote)
    return votes


def read_votes(path: str | Path) -> list[Vote]:
    """Read a VOTES.jsonl file (UTF-8) into votes.

    Raises:
        ConsensusError: when the file cannot be read, or as ``parse_votes`` does.
    """
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConsensusError(f"cannot read the vote file: {e.strerror or e}", path=source) from e
    lines = []
    # Decode line by line so that an encoding fault is reported with its line number too.
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConsensusError(f"not UTF-8 ({e.reason})", path=source, lines=(number,)) from e
    return parse_votes(lines, source=source)


def consensus_from_jsonl(path: str | Path) -> list[Consensus]:
    """Recompute every consensus from a raw VOTES.jsonl file: the auditor's entry point.

    Raises:
        ConsensusError: as ``read_votes`` and ``consensus`` do.
    """
    return consensus(read_votes(path))


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys; for an audit input that is a silent guess.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"key {key!r} appears twice")
        obj[key] = value
    return obj


def _parse_line(line: str, number: int, source: str | None) -> Vote:
    try:
        obj = json.loads(line, object_pairs_hook=_reject_duplicate_keys)
    except ValueError as e:  # JSONDecodeError is a ValueError, and so is a repeated key
        raise ConsensusError(f"not a valid JSON vote: {e}", path=source, lines=(number,)) from e
    if not isinstance(obj, dict):
        raise ConsensusError(f"expected a JSON object, got {type(obj).__name__}", path=source, lines=(number,))
    try:
        return Vote.model_validate(obj)
    except ValidationError as e:
        raise ConsensusError(_describe(e), path=source, lines=(number,)) from e


def _describe(error: ValidationError) -> str:
    """One short sentence per pydantic error: the field, the problem and the offending value."""
    parts = []
    for err in error.errors():
        field = ".".join(str(p) for p in err["loc"]) or "vote"
        text = f"{field}: {err['msg']}"
        if err["type"] != "missing":
            text += f" (got {err['input']!r})"
        parts.append(text)
    return "; ".join(parts)
