"""Submissions: the state column takes only the states of ``runner.board.states.SubmissionState``.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

STATES = ("received", "verified", "queued", "running", "auditing", "published", "failed", "cancelled")
"""As they were when this revision was written (a revision never follows the code that comes after it)."""


def upgrade() -> None:
    """Add the check constraint ``submission_state`` on ``submissions.state`` (SQLite: by a batch copy of the table,
    which nothing references)."""
    allowed = ", ".join(f"'{state}'" for state in STATES)
    with op.batch_alter_table("submissions") as batch:
        batch.create_check_constraint("submission_state", f"state IN ({allowed})")


def downgrade() -> None:
    """Drop the check constraint."""
    with op.batch_alter_table("submissions") as batch:
        batch.drop_constraint("submission_state", type_="check")
