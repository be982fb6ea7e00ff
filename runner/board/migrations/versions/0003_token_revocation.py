"""Tokens: an admin can revoke one, and the board records when each was last used.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both databases (SQLite has DROP COLUMN since 3.35): a batch copy of ``tokens`` would drop
# the table that ``submissions`` references, which SQLite's enforced foreign keys refuse.


def upgrade() -> None:
    """Add ``tokens.revoked_at`` and ``tokens.last_used_at``."""
    op.add_column("tokens", sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("tokens", sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop ``tokens.revoked_at`` and ``tokens.last_used_at``."""
    op.drop_column("tokens", "last_used_at")
    op.drop_column("tokens", "revoked_at")
