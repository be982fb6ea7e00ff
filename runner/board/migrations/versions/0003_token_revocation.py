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


def upgrade() -> None:
    """Add ``tokens.revoked_at`` and ``tokens.last_used_at``."""
    with op.batch_alter_table("tokens") as table:
        table.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop ``tokens.revoked_at`` and ``tokens.last_used_at``."""
    with op.batch_alter_table("tokens") as table:
        table.drop_column("last_used_at")
        table.drop_column("revoked_at")
