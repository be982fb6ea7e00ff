"""What every part of a running board shares, and where its files live in its data folder.

Nothing here imports another board module but the config, so every module can import it (no import circle).
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from runner.board.config import BoardConfig

RUNS_DIR = "runs"
"""Each submission's run folder, ``runs/submission-<id>``."""
PUBLISHED_DIR = "published"
"""Bundles, signed statements and signatures of published runs."""
SMOKE_DIR = "smoke"
"""Scratch of smoke tests in progress."""


@dataclass(frozen=True)
class BoardContext:
    """What every part of a running board shares."""

    config: BoardConfig
    engine: Engine
    sessions: sessionmaker[Session]
    key: Ed25519PrivateKey
