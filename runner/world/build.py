"""Write the snapshot, its docs and its manifest. Deterministic: same seed, same logical digest."""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path

from runner.world import DATASET_ID, DOCS_DIR, MANIFEST_NAME, SNAPSHOT_NAME, docs
from runner.world.digest import digest_database, file_sha256, logical_digest
from runner.world.generate import GENERATOR_VERSION, SEED, all_tables, generate, vendor_of
from runner.world.manifest import SnapshotFile, TableEntry, WorldManifest, write_manifest
from runner.world.org import AS_OF, ts

REVISION = "1"
PUBLISH_DATE = "2026-07-01"


def _sort_key(row: tuple[object, ...]) -> tuple[tuple[int, object], ...]:
    # NULLs first, then integers, then text: the same order SQLite's ORDER BY uses.
    return tuple((0, 0) if v is None else (1, v) if isinstance(v, int) else (2, v) for v in row)


def write_snapshot(path: Path, seed: int = SEED) -> None:
    """Generate the world and write it to ``path`` as a VACUUMed, DELETE-journal SQLite file."""
    rows = generate(seed)
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
        for table in all_tables():
            conn.execute(table.ddl())
        with conn:
            for table in all_tables():
                marks = ", ".join("?" for _ in table.columns)
                ordered: list[tuple[object, ...]] = sorted(rows[table.name], key=_sort_key)
                conn.executemany(f"INSERT INTO {table.name} VALUES ({marks})", ordered)
        problems = conn.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RuntimeError(f"world generator broke a within-vendor key: {problems[:5]}")
        conn.execute("VACUUM")
    finally:
        conn.close()


def build(world_dir: Path, seed: int = SEED) -> WorldManifest:
    """Rebuild snapshot, docs and manifest in ``world_dir``; returns the new manifest."""
    world_dir.mkdir(parents=True, exist_ok=True)
    snapshot = world_dir / SNAPSHOT_NAME
    # Build beside the target, then move into place, so a failed build never leaves half a world.
    with tempfile.TemporaryDirectory(dir=world_dir) as tmp:
        staged = Path(tmp) / SNAPSHOT_NAME
        write_snapshot(staged, seed)
        staged.replace(snapshot)
    docs_dir = world_dir / DOCS_DIR
    docs_dir.mkdir(exist_ok=True)
    for stale in docs_dir.glob("*.md"):
        stale.unlink()
    doc_digests = {}
    for name, text in docs.render().items():
        (docs_dir / name).write_text(text, encoding="utf-8")
        doc_digests[name] = hashlib.sha256(text.encode()).hexdigest()
    tables = digest_database(snapshot)
    manifest = WorldManifest(
        dataset=DATASET_ID,
        revision=REVISION,
        publish_date=PUBLISH_DATE,
        as_of=ts(AS_OF),
        generator_version=GENERATOR_VERSION,
        seed=seed,
        snapshot=SnapshotFile(
            path=SNAPSHOT_NAME,
            sha256=file_sha256(snapshot),
            bytes=snapshot.stat().st_size,
            sqlite_version=sqlite3.sqlite_version,
            journal_mode="delete",
        ),
        logical_digest=logical_digest(tables),
        tables={
            name: TableEntry(vendor=vendor_of(name), rows=d.rows, digest=d.digest) for name, d in sorted(tables.items())
        },
        docs=doc_digests,
    )
    write_manifest(world_dir / MANIFEST_NAME, manifest)
    return manifest
