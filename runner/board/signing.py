"""The board's Ed25519 key, and the signed statement it writes beside each published bundle."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runner.record.model import RunRecord
from runner.record.verify import (
    Statement,
    StatementDigests,
    public_key_sha256,
    statement_bytes,
    statement_paths,
)
from runner.world.digest import file_sha256

KEY_NAME: Final = "board.key"
PUBLIC_KEY_NAME: Final = "board.pub"


def load_or_create_key(data_dir: Path) -> Ed25519PrivateKey:
    """The board's private key at ``<data_dir>/board.key`` (owner-only), made on first use with its ``board.pub``."""
    path = data_dir / KEY_NAME
    if path.is_file():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path} is not an Ed25519 private key")
        return key
    data_dir.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    (data_dir / PUBLIC_KEY_NAME).write_bytes(public_pem(key))
    return key


def public_pem(key: Ed25519PrivateKey) -> bytes:
    """The public half of ``key`` as PEM: what ``/api/v1/key`` serves and ``ispm verify --key`` reads."""
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def statement_of(
    record: RunRecord, bundle: Path, *, board_id: str, key: Ed25519PrivateKey, submission_id: int, signed_at: str
) -> Statement:
    """What a board signs about ``bundle``, the bundled run of ``record``: the fields ``ispm verify`` checks."""
    return Statement(
        board_id=board_id,
        key_sha256=public_key_sha256(key.public_key()),
        submission_id=submission_id,
        bundle_name=bundle.name,
        bundle_sha256=file_sha256(bundle),
        run_id=record.run_id,
        official=record.official,
        candidate=record.spec.candidate,
        resolved_models=record.resolved_models,
        digests=StatementDigests(
            world=record.digests.world_logical,
            task_set=record.digests.task_set,
            ground_truth=record.digests.ground_truth,
            rubric_set=record.digests.rubric_set,
        ),
        images=record.images,
        runner_version=record.runner_version,
        started_at=record.started_at,
        ended_at=record.ended_at,
        signed_at=signed_at,
    )


def sign_statement(key: Ed25519PrivateKey, statement: Statement, bundle: Path) -> tuple[Path, Path]:
    """Write ``statement`` and its base64 signature beside ``bundle``; return both paths."""
    statement_path, signature_path = statement_paths(bundle)
    signed = statement_bytes(statement)
    statement_path.write_bytes(signed)
    signature_path.write_bytes(base64.b64encode(key.sign(signed)) + b"\n")
    return statement_path, signature_path
