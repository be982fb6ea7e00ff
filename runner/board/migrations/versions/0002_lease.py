"""Leases: a worker holds a submission until ``lease_until`` unless it renews it.

A row without a lease is held by no one, so a hold taken before leases existed is taken over at the next claim.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``submissions.lease_until``."""
    with op.batch_alter_table("submissions") as table:
        table.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop ``submissions.lease_until``."""
    with op.batch_alter_table("submissions") as table:
        table.drop_column("lease_until")
