"""Per-submitter bearer tokens: created by an admin, stored as sha256, checked on every submission.

A token reads ``ispm_<43 url-safe characters>`` (256 random bits), so a plain sha256 is enough to store it: there
is nothing to brute-force that a slow hash would protect.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.board.db import Token, utcnow
from runner.board.errors import BoardError

PREFIX = "ispm_"


def token_sha256(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(session: Session, submitter: str, *, open_limit: int, valid_days: float | None = None) -> str:
    """Store a new token for ``submitter`` and return its secret (shown once; only its hash is kept)."""
    secret = PREFIX + secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        Token(
            submitter=submitter,
            token_sha256=token_sha256(secret),
            created_at=now,
            expires_at=None if valid_days is None else now + timedelta(days=valid_days),
            open_limit=open_limit,
        )
    )
    session.commit()
    return secret


def bearer(header: str | None) -> str:
    """The token in an ``Authorization: Bearer ...`` header.

    Raises:
        BoardError: 401, no bearer token.
    """
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise BoardError("no bearer token: send Authorization: Bearer $ISPM_BOARD_TOKEN", status=401)
    return value.strip()


def authenticate(session: Session, secret: str, *, now: datetime | None = None) -> Token:
    """The token row for ``secret``.

    Raises:
        BoardError: 401, the token is not one this board issued, or it has expired.
    """
    row = session.scalars(select(Token).where(Token.token_sha256 == token_sha256(secret))).one_or_none()
    if row is None:
        raise BoardError("this token was not issued by this board", status=401)
    expires = row.expires_at
    if expires is not None:
        # SQLite hands back naive datetimes; every stored time is UTC.
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        if (now or utcnow()) >= expires:
            raise BoardError(f"this token expired at {expires.isoformat()}", status=401)
    return row
