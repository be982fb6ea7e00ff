"""What one board serves: its id, data folder, database, judges, candidate models, backend and limits.

The config is a YAML file. Provider keys are never in it: the board's process environment holds them, as it does
for ``ispm run`` (the submitter's keys are never used).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.board.errors import BoardError
from runner.run.spec import Calibration

DEFAULT_UPLOAD_CAP = 8 * 1024**3
"""8 GiB: a ``docker save`` of an agent on the base image is ~0.2 GB; a real agent stack is a few GB."""


class TrialSetting(BaseModel):
    """TEST ONLY: shortens the official-shaped run. A run made under it is recorded as not official."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    tasks: list[str] = Field(min_length=1)
    """Only these task ids."""
    epochs: int = Field(default=1, ge=1)
    """Epochs per task."""
    calibration: Calibration | None = None
    """``replay`` mounts gold recordings (for the gold replay image in tests); ``None`` uses the candidate."""


class BoardConfig(BaseModel):
    """One board's settings."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    board_id: str = Field(min_length=1, max_length=100)
    """Names this board in every signed statement."""
    data_dir: Path
    """Uploads, run folders, bundles, the signing key and (by default) the SQLite database."""
    database_url: str | None = None
    """A SQLAlchemy URL (``postgresql+psycopg://...``); by default SQLite at ``<data_dir>/board.sqlite``."""
    judges: tuple[str, str]
    """The two judge aliases every official run uses."""
    candidates: list[str] = Field(min_length=1)
    """The candidate models the board serves; a submission names one of them."""
    backend: Literal["docker", "ray"] = "docker"
    """Where an official run's samples run: this machine's Docker engine, or the Ray cluster at ``ray_address``
    (``runner.cluster``). The smoke test always runs on this machine's engine."""
    ray_address: str | None = None
    """The cluster of the ``ray`` backend (``host:port``); by default ``RAY_ADDRESS`` from the board's environment."""
    max_upload_bytes: int = Field(default=DEFAULT_UPLOAD_CAP, gt=0)
    """The largest ``docker save`` stream accepted; a longer one is cut off and refused."""
    open_submissions_per_token: int = Field(default=2, ge=1)
    """How many submissions of one token may be open (not published, failed or cancelled) at once."""
    smoke_task: str = "ispm-001"
    """The one task an image is smoke-tested on before its run is queued."""
    smoke_limit_s: float = Field(default=120.0, gt=0)
    """Wall time of the smoke sample: a broken image fails in a minute, not after 12 hours."""
    lease_s: float = Field(default=60.0, gt=0)
    """How long a worker's hold on a submission lasts unless renewed: a worker that died (a board killed with
    ``kill -9``, a lost host) loses its submissions this long after its last renewal, and another worker takes them
    over."""
    heartbeat_s: float = Field(default=5.0, gt=0)
    """How often a working worker renews its lease and looks for a cancel; under half of ``lease_s``."""
    head_timeout_s: float = Field(default=10.0, gt=0)
    """A request head must arrive within this many seconds of its first byte (of a new connection's start); past
    it the client gets a 408 and the connection is closed."""
    min_body_bytes_per_s: float = Field(default=16 * 1024, gt=0)
    """A request body must come at least this fast on average, after ``body_grace_s``; else a 408 and the
    connection is closed. 16 KiB/s passes a real upload on any working link and ends a trickle."""
    body_grace_s: float = Field(default=10.0, ge=0)
    """Seconds a body may take to get going before its rate counts."""
    max_connections: int = Field(default=1000, ge=1)
    """Connections served at once; past it a new request is a 503 until one ends (slow ones end by the limits
    above and ``max_per_client``)."""
    max_per_client: int = Field(default=64, ge=1)
    """Connections one client address may hold at once (a connection past it is closed as it opens), and requests
    one client may have under way (past it a 429); behind a trusted proxy a client is its forwarded address."""
    first_byte_timeout_s: float = Field(default=2.0, gt=0)
    """A new connection that sends no byte within this many seconds is closed, unanswered."""
    trusted_proxies: list[str] = Field(default_factory=list)
    """Addresses of reverse proxies in front of the board: their ``X-Forwarded-For`` names the client (for
    ``max_per_client``), and their own connections are not capped by address. Empty: no header is believed."""
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    """The board's public address (``https://board.example``) for the absolute links it writes (a submission's
    ``status_url``, ``/submit``'s commands); by default the address a request was made to."""
    binary: Path | None = None
    """A single-file ``ispm`` executable to serve with its sha256 on "Run it locally", when one is built."""
    trial: TrialSetting | None = None
    """TEST ONLY: a shortened run, recorded as not official. Absent on a real board."""

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> BoardConfig:
        # Two heartbeats fit in a lease, so one slow renewal does not lose it.
        if self.heartbeat_s * 2 > self.lease_s:
            raise ValueError(f"heartbeat_s ({self.heartbeat_s:g}) must be at most half of lease_s ({self.lease_s:g})")
        return self

    def url(self) -> str:
        """The database URL, defaulting to SQLite in the data folder."""
        return self.database_url or f"sqlite:///{self.data_dir / 'board.sqlite'}"


def load_config(path: Path) -> BoardConfig:
    """Read a board config from YAML; a relative ``data_dir`` is relative to the config file.

    Raises:
        BoardError: the file is missing, not YAML, or not a valid config.
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BoardError(f"cannot read the board config {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise BoardError(f"the board config {path} is not a mapping")
    try:
        config = BoardConfig.model_validate(raw)
    except ValidationError as exc:
        raise BoardError(f"the board config {path} is invalid: {exc}") from exc
    if not config.data_dir.is_absolute():
        config = config.model_copy(update={"data_dir": (path.parent / config.data_dir).resolve()})
    return config
