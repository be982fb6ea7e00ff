"""``ispm verify``: a published bundle is the board's, unchanged, and its numbers hold.

The board signs a small :class:`Statement` about each bundle it publishes (the bundle's sha256, the run, the
candidate, the resolved models, the digests the numbers are pinned to, the image ids, the runner version, the
board and the times) with its Ed25519 key. :func:`verify` checks, in order:

1. **key**: the statement names the fingerprint of the key it was signed with; a different key is named as such;
2. **signature**: the signature holds over the statement's exact bytes (an edited statement fails here);
3. **bundle**: the bundle's sha256 is the signed one (one changed byte fails here);
4. **statement**: what the statement says equals the bundle's own record;
5. **audit**: the full offline audit of the bundle (:func:`runner.record.audit.audit`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, Final, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import IspmError
from runner.record.audit import AuditReport, audit
from runner.record.bundle import read_member
from runner.record.model import RECORD_NAME
from runner.world.digest import file_sha256

STATEMENT_SUFFIX: Final = ".statement.json"
SIGNATURE_SUFFIX: Final = ".statement.sig"


class VerifyError(IspmError):
    """Verification cannot start: a missing file, or a key or statement that cannot be read."""


class StatementDigests(BaseModel):
    """What the run's numbers are pinned to."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    world: str
    """The world snapshot's logical digest."""
    task_set: str
    """sha256 of the task definitions."""
    ground_truth: str
    """The published ground truth's digest."""
    rubric_set: str
    """The rubric set's digest."""


class Statement(BaseModel):
    """What the board signs about one published bundle."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    version: Literal[1] = 1
    """The statement format's version."""
    board_id: str
    """The board that ran and signed it."""
    key_sha256: str
    """sha256 of the raw Ed25519 public key that signed this statement."""
    submission_id: int
    """The board's id of the submission the run was made for."""
    bundle_name: str
    """The bundle's file name, as the board serves it."""
    bundle_sha256: str
    """sha256 of the bundle file, as published."""
    run_id: str
    """The run inside the bundle."""
    official: bool
    """False for a run shortened by a test-only setting, or any spec the v1 lock refused."""
    candidate: str | None
    """The candidate model alias the agent ran against."""
    resolved_models: dict[str, str]
    """Model id the wire returned, by alias."""
    digests: StatementDigests
    """What the run's numbers are pinned to."""
    images: dict[str, str]
    """The engine's image id, by tag."""
    runner_version: str
    """The ``ispm`` version that ran it."""
    started_at: str
    """When the run started (UTC, ISO 8601), as its record says."""
    ended_at: str | None
    """When the run ended, as its record says."""
    signed_at: str
    """When the board signed this statement (UTC, ISO 8601)."""


class VerifyReport(BaseModel):
    """What verification found; ``ok`` only when ``problems`` is empty."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    bundle: str
    """The bundle verified."""
    problems: list[str] = Field(default_factory=list)
    """Every failure, one line each, prefixed by its check."""
    audit: AuditReport | None = None
    """The full audit, when the signature held and the bundle is the signed one."""

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.problems

    def summary_lines(self) -> list[str]:
        """What ``ispm verify`` prints: each problem, or that the signature, the bundle and the audit hold."""
        if self.problems:
            return [f"FAIL {p}" for p in self.problems]
        checks = self.audit.checks if self.audit is not None else {}
        counted = ", ".join(f"{name} {n}" for name, n in checks.items())
        return [f"ok {self.bundle}: signature, bundle sha256, statement and audit hold ({counted})"]


def statement_bytes(statement: Statement) -> bytes:
    """The canonical bytes that are signed: sorted keys, no spaces, UTF-8, one trailing newline."""
    return (json.dumps(statement.model_dump(mode="json"), sort_keys=True, separators=(",", ":")) + "\n").encode()


def public_key_sha256(key: Ed25519PublicKey) -> str:
    """sha256 of the raw 32-byte public key: how a statement names its key."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The Ed25519 public key in the PEM file at ``path``.

    Raises:
        VerifyError: the file is missing or does not hold an Ed25519 public key.
    """
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise VerifyError(f"cannot read the public key {path}: {exc}") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise VerifyError(f"{path} is not an Ed25519 public key")
    return key


def statement_paths(bundle: Path) -> tuple[Path, Path]:
    """Where the statement and its signature sit beside a bundle: ``<bundle>.statement.json`` and ``.sig``."""
    return bundle.with_name(bundle.name + STATEMENT_SUFFIX), bundle.with_name(bundle.name + SIGNATURE_SUFFIX)


def verify(
    bundle: Path, key_path: Path, *, statement_path: Path | None = None, signature_path: Path | None = None
) -> VerifyReport:
    """Verify ``bundle`` against the board key at ``key_path``, its statement and signature (beside it by default).

    Raises:
        VerifyError: the bundle, statement, signature or key file is missing or unreadable.
    """
    default_statement, default_signature = statement_paths(bundle)
    statement_path = statement_path or default_statement
    signature_path = signature_path or default_signature
    key = load_public_key(key_path)
    try:
        signed = statement_path.read_bytes()
        signature = base64.b64decode(signature_path.read_bytes().strip(), validate=True)
    except (OSError, ValueError) as exc:
        raise VerifyError(f"cannot read the statement or its signature: {exc}") from exc
    if not bundle.is_file():
        raise VerifyError(f"no bundle at {bundle}")
    report = VerifyReport(bundle=str(bundle))
    try:
        statement = Statement.model_validate_json(signed)
    except ValidationError as exc:
        report.problems.append(f"statement: {statement_path} is not a valid statement: {exc.errors()[0]['msg']}")
        return report
    fingerprint = public_key_sha256(key)
    if statement.key_sha256 != fingerprint:
        report.problems.append(
            f"key: the statement was signed by the key {statement.key_sha256[:16]}…, "
            f"not by {key_path} ({fingerprint[:16]}…): a wrong key"
        )
        return report
    try:
        key.verify(signature, signed)
    except InvalidSignature:
        report.problems.append(
            f"signature: the signature does not hold over {statement_path}: the statement was edited after signing"
        )
        return report
    actual = file_sha256(bundle)
    if actual != statement.bundle_sha256:
        report.problems.append(
            f"bundle: sha256 {actual} is not the signed {statement.bundle_sha256}: the bundle was changed"
        )
        return report
    report.problems += statement_mismatches(statement, bundle)
    report.audit = audit(bundle)
    report.problems += [f"audit: {p}" for p in report.audit.problems]
    return report


def statement_mismatches(statement: Statement, bundle: Path) -> list[str]:
    """Every field of ``statement`` that differs from the record inside ``bundle``."""
    record = _bundle_record(bundle)
    if record is None:
        return [f"statement: the bundle holds no {RECORD_NAME} to compare the statement with"]
    spec = record.get("spec") or {}
    digests = record.get("digests") or {}
    said = {
        "run_id": statement.run_id,
        "official": statement.official,
        "candidate": statement.candidate,
        "resolved_models": statement.resolved_models,
        "images": statement.images,
        "runner_version": statement.runner_version,
        "started_at": statement.started_at,
        "digests.world": statement.digests.world,
        "digests.task_set": statement.digests.task_set,
        "digests.ground_truth": statement.digests.ground_truth,
        "digests.rubric_set": statement.digests.rubric_set,
    }
    recorded = {
        "run_id": record.get("run_id"),
        "official": record.get("official"),
        "candidate": spec.get("candidate"),
        "resolved_models": record.get("resolved_models"),
        "images": record.get("images"),
        "runner_version": record.get("runner_version"),
        "started_at": record.get("started_at"),
        "digests.world": digests.get("world_logical"),
        "digests.task_set": digests.get("task_set"),
        "digests.ground_truth": digests.get("ground_truth"),
        "digests.rubric_set": digests.get("rubric_set"),
    }
    return [
        f"statement: {name} is {said[name]!r} but the bundle's record says {recorded[name]!r}"
        for name in said
        if said[name] != recorded[name]
    ]


def _bundle_record(bundle: Path) -> dict[str, Any] | None:
    # Streamed, within the record's cap (runner.record.bundle): the bundle is the submitter's.
    raw = read_member(bundle, RECORD_NAME)
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
