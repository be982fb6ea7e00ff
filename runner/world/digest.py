"""Digests of the snapshot: the file's sha256, and a logical digest that survives SQLite upgrades.

The logical digest hashes each table's declared columns and its rows in a canonical order, encoded
as JSON, so two builds on different SQLite versions (different page layouts) still agree.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TableDigest:
    """Row count and content digest of one table."""

    rows: int
    digest: str


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes, streamed: the one file hash every stage uses (snapshot, images, bundles)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open a snapshot read-only and immutable, as every consumer must."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def table_names(conn: sqlite3.Connection) -> list[str]:
    """User tables, sorted by name."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


def table_digest(conn: sqlite3.Connection, table: str) -> TableDigest:
    """Digest one table: its column names and types, then every row in canonical order."""
    columns = [(r[1], r[2]) for r in conn.execute(f'PRAGMA table_info("{table}")')]
    h = hashlib.sha256()
    h.update(json.dumps({"table": table, "columns": columns}, separators=(",", ":")).encode())
    order = ", ".join(str(i + 1) for i in range(len(columns)))
    count = 0
    for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY {order}'):
        h.update(b"\n")
        h.update(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode())
        count += 1
    return TableDigest(rows=count, digest=h.hexdigest())


def logical_digest(tables: dict[str, TableDigest]) -> str:
    """Combine per-table digests into one, over the sorted table names."""
    h = hashlib.sha256()
    for name in sorted(tables):
        h.update(f"{name}\t{tables[name].rows}\t{tables[name].digest}\n".encode())
    return h.hexdigest()


def digest_database(path: Path) -> dict[str, TableDigest]:
    """Per-table digests of a snapshot file."""
    conn = open_readonly(path)
    try:
        return {t: table_digest(conn, t) for t in table_names(conn)}
    finally:
        conn.close()
