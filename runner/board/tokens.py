"""Per-submitter bearer tokens: created by an admin, stored as sha256, checked on every request that needs one.

The admin lists them (owner, expiry, last use; never a secret) and revokes one; a revoked token is refused from
the next request on, since every request reads its row.

A token reads ``ispm_<43 url-safe characters>`` (256 random bits), so a plain sha256 is enough to store it: there
is nothing to brute-force that a slow hash would protect.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Final

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from runner.board.db import Token, utcnow
from runner.board.errors import BoardError
from runner.board.model import TokenState, TokenView

PREFIX = "ispm_"


MAX_VALID_DAYS: Final = 36_500
"""A hundred years: the longest validity a token may be given (a date far past it overflows)."""


def token_sha256(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(session: Session, submitter: str, *, open_limit: int, valid_days: float | None = None) -> str:
    """Store a new token for ``submitter`` and return its secret (shown once; only its hash is kept).

    Raises:
        BoardError: 422, ``valid_days`` is not a number of days from over 0 to ``MAX_VALID_DAYS`` (a token dead
            when made, or one past any date the database keeps: leave it out for a token that never expires).
    """
    if valid_days is not None and not 0 < valid_days <= MAX_VALID_DAYS:
        raise BoardError(
            f"a token's validity must be over 0 and at most {MAX_VALID_DAYS} days, not {valid_days:g} "
            "(leave --valid-days out for a token that never expires)",
            status=422,
        )
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


def _utc(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; every stored time is UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else _utc(moment)


def authenticate(session: Session, secret: str, *, now: datetime | None = None) -> Token:
    """The token row for ``secret``; its last use is stamped (committed in ``session``).

    Raises:
        BoardError: 401, the token is not one this board issued, was revoked, or has expired.
    """
    row = session.scalars(select(Token).where(Token.token_sha256 == token_sha256(secret))).one_or_none()
    if row is None:
        raise BoardError("this token was not issued by this board", status=401)
    revoked = _aware(row.revoked_at)
    if revoked is not None:
        raise BoardError(f"this token was revoked at {revoked.isoformat()}", status=401)
    expires = _aware(row.expires_at)
    if expires is not None and (now or utcnow()) >= expires:
        raise BoardError(f"this token expired at {expires.isoformat()}", status=401)
    session.execute(update(Token).where(Token.id == row.id).values(last_used_at=now or utcnow()))
    session.commit()
    return row


def _view(row: Token, now: datetime) -> TokenView:
    expires = _aware(row.expires_at)
    revoked = _aware(row.revoked_at)
    state: TokenState = (
        "revoked" if revoked is not None else "expired" if expires is not None and now >= expires else "active"
    )
    return TokenView(
        id=row.id, submitter=row.submitter, created_at=_utc(row.created_at), expires_at=expires,
        last_used_at=_aware(row.last_used_at), revoked_at=revoked, open_limit=row.open_limit, state=state,
    )  # fmt: skip


def list_tokens(session: Session, *, now: datetime | None = None) -> list[TokenView]:
    """Every token of the board, oldest first, as its admin sees them."""
    moment = now or utcnow()
    return [_view(row, moment) for row in session.scalars(select(Token).order_by(Token.id))]


def revoke_token(session: Session, token_id: int, *, now: datetime | None = None) -> TokenView:
    """Revoke token ``token_id``: from the next request on it is refused.

    Raises:
        BoardError: 404, no such token; 409, it was revoked already.
    """
    moment = now or utcnow()
    row = session.get(Token, token_id)
    if row is None:
        raise BoardError(f"no token {token_id}", status=404)
    if row.revoked_at is not None:
        raise BoardError(f"token {token_id} ({row.submitter}) was revoked already", status=409)
    row.revoked_at = moment
    session.commit()
    return _view(row, moment)


def token_lines(tokens: list[TokenView]) -> list[str]:
    """``tokens`` as an aligned table with a header: id, submitter, state, expiry, last use."""

    def when(moment: datetime | None, none: str) -> str:
        return none if moment is None else moment.strftime("%Y-%m-%d %H:%M:%SZ")

    rows = [("ID", "SUBMITTER", "STATE", "EXPIRES", "LAST USED")] + [
        (str(t.id), t.submitter, t.state, when(t.expires_at, "never"), when(t.last_used_at, "never")) for t in tokens
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
