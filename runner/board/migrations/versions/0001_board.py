"""The board's first schema: tokens and submissions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``tokens`` and ``submissions``."""
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("submitter", sa.String(200), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("open_limit", sa.Integer, nullable=False),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("token_id", sa.Integer, sa.ForeignKey("tokens.id"), nullable=False),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("candidate", sa.String(200), nullable=False),
        sa.Column("links", sa.JSON, nullable=False),
        sa.Column("state", sa.String(20), nullable=False, index=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("upload_sha256", sa.String(64), nullable=False),
        sa.Column("upload_bytes", sa.BigInteger, nullable=False),
        sa.Column("image_id", sa.String(80), nullable=False),
        sa.Column("image_tag", sa.String(200), nullable=False),
        sa.Column("worker", sa.String(200), nullable=True),
        sa.Column("run_id", sa.String(100), nullable=True),
        sa.Column("run_dir", sa.Text, nullable=True),
        sa.Column("samples_done", sa.Integer, nullable=False),
        sa.Column("samples_planned", sa.Integer, nullable=False),
        sa.Column("eta_s", sa.Float, nullable=True),
        sa.Column("bundle_sha256", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("submissions")
    op.drop_table("tokens")
