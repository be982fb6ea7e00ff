"""Table specifications: one source for the DDL, the docs and the docs-coverage test.

Each vendor's tables are declared as ``Table`` values in ``runner.world.tables``. The builder turns
them into ``CREATE TABLE`` statements, and ``runner.world.docs`` renders the very same specs into
the agent-visible schema pages, so a column cannot exist without its documentation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

SqlType = Literal["TEXT", "INTEGER"]


@dataclass(frozen=True)
class Column:
    """One column: its SQL type and what an analyst needs to know to use it."""

    name: str
    type: SqlType
    doc: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    """One table of one vendor, as that vendor's API or export would present it."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    # Keys *within* the vendor only: the world never carries a foreign key across vendors.
    foreign_keys: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...] = field(default=())

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def ddl(self) -> str:
        """The ``CREATE TABLE`` statement for this table."""
        parts = [f"  {c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in self.columns]
        if self.primary_key:
            parts.append(f"  PRIMARY KEY ({', '.join(self.primary_key)})")
        for cols, ref_table, ref_cols in self.foreign_keys:
            parts.append(f"  FOREIGN KEY ({', '.join(cols)}) REFERENCES {ref_table} ({', '.join(ref_cols)})")
        return f"CREATE TABLE {self.name} (\n" + ",\n".join(parts) + "\n)"


def col(name: str, doc: str, type_: SqlType = "TEXT", *, required: bool = False) -> Column:
    """Shorthand for a column spec; ``required`` makes it NOT NULL."""
    return Column(name=name, type=type_, doc=doc, nullable=not required)


def fk(cols: str, table: str, ref: str) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """Shorthand for a within-vendor foreign key: ``fk("user_id", "okta_users", "id")``."""
    return (tuple(cols.split(",")), table, tuple(ref.split(",")))
