"""The board's database: tokens and submissions, through SQLAlchemy 2, migrated by Alembic.

SQLite (the embedded default) runs in WAL mode with a busy timeout, so the web server and the worker share it.
PostgreSQL is for production; workers there claim a submission with ``FOR UPDATE SKIP LOCKED`` and hold it with
a lease (``runner.board.lease``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import JSON, BigInteger, DateTime, Enum, ForeignKey, Integer, String, Text, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from runner.board.states import SubmissionState

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def utcnow() -> datetime:
    """Now, in UTC, to the second."""
    return datetime.now(UTC).replace(microsecond=0)


class Base(DeclarativeBase):
    """The board's tables."""


class Token(Base):
    """A submitter's bearer token; only its sha256 is stored."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submitter: Mapped[str] = mapped_column(String(200))
    """Who the admin gave it to."""
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    """sha256 of the secret; the secret itself is shown once, at creation."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Past this instant the token is refused; ``None`` never expires."""
    open_limit: Mapped[int] = mapped_column(Integer)
    """Open submissions allowed at once."""
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When the admin revoked it; from then on it is refused. ``None`` while it is not revoked."""
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When a request last presented it (and it was accepted); ``None`` if never."""


class Submission(Base):
    """One submitted agent image and everything the board did with it."""

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"))
    display_name: Mapped[str] = mapped_column(String(200))
    """As the submitter wrote it: escaped wherever it is shown."""
    candidate: Mapped[str] = mapped_column(String(200))
    links: Mapped[list[str]] = mapped_column(JSON)
    state: Mapped[SubmissionState] = mapped_column(
        Enum(
            SubmissionState, name="submission_state", native_enum=False, length=20, create_constraint=True,
            values_callable=lambda states: [s.value for s in states], validate_strings=True,
        ),
        index=True,
    )  # fmt: skip
    """Stored as its value (``received``...); the database refuses any other (a check constraint)."""
    reason: Mapped[str | None] = mapped_column(Text)
    """Why it failed or was cancelled."""
    upload_sha256: Mapped[str] = mapped_column(String(64))
    upload_bytes: Mapped[int] = mapped_column(BigInteger)
    image_id: Mapped[str] = mapped_column(String(80))
    """The engine's id of the loaded image (``sha256:...``)."""
    image_tag: Mapped[str] = mapped_column(String(200))
    """The board's own tag for it; the submitter's tags are never loaded."""
    worker: Mapped[str | None] = mapped_column(String(200))
    """The worker holding it now; ``None`` when no one is working on it."""
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When the holder's lease runs out unless it renews it; past it, any worker may take the submission over."""
    run_id: Mapped[str | None] = mapped_column(String(100))
    run_dir: Mapped[str | None] = mapped_column(Text)
    samples_done: Mapped[int] = mapped_column(Integer, default=0)
    samples_planned: Mapped[int] = mapped_column(Integer, default=0)
    eta_s: Mapped[float | None] = mapped_column()
    """Projected seconds left in the run, at its pace so far."""
    bundle_sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and enforced foreign keys."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def migrate(engine: Engine) -> None:
    """Bring the database to the newest schema with Alembic (a no-op when it is current)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def sessions(engine: Engine) -> sessionmaker[Any]:
    """A session factory that keeps loaded rows readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)
