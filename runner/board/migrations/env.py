"""Alembic's entry point: migrate the connection ``runner.board.db.migrate`` hands over."""

from __future__ import annotations

from alembic import context

from runner.board.db import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()
