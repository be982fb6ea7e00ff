"""Check a world folder against its manifest. Every difference is named; nothing is repaired."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from pydantic import BaseModel

from runner.errors import WorldError
from runner.world import DOCS_DIR, MANIFEST_NAME
from runner.world.digest import digest_database, file_sha256, logical_digest
from runner.world.manifest import WorldManifest, load_manifest

SQLITE_HEADER = b"SQLite format 3\x00"


class WorldCheck(BaseModel):
    """A successful verification: the manifest and the snapshot path it vouches for."""

    manifest: WorldManifest
    snapshot: Path


def _journal_problems(snapshot: Path, header: bytes) -> list[str]:
    problems = []
    # Bytes 18 and 19 of the header are the write/read format versions: 2 means WAL.
    if len(header) >= 20 and (header[18] == 2 or header[19] == 2):
        problems.append(f"{snapshot.name}: snapshot is in WAL journal mode; v1 requires journal_mode=DELETE")
    for suffix in ("-wal", "-shm", "-journal"):
        side = snapshot.with_name(snapshot.name + suffix)
        if side.exists():
            problems.append(f"{side.name}: unexpected SQLite sidecar file next to the snapshot")
    return problems


def _docs_problems(world_dir: Path, manifest: WorldManifest) -> list[str]:
    problems = []
    docs_dir = world_dir / DOCS_DIR
    for name, expected in sorted(manifest.docs.items()):
        page = docs_dir / name
        if not page.is_file():
            problems.append(f"missing file: {DOCS_DIR}/{name}")
        elif hashlib.sha256(page.read_bytes()).hexdigest() != expected:
            problems.append(f"{DOCS_DIR}/{name}: content differs from the manifest")
    if docs_dir.is_dir():
        for extra in sorted(p.name for p in docs_dir.iterdir() if p.name not in manifest.docs):
            problems.append(f"{DOCS_DIR}/{extra}: file not listed in the manifest")
    return problems


def _table_problems(snapshot: Path, manifest: WorldManifest) -> list[str]:
    try:
        actual = digest_database(snapshot)
    except sqlite3.DatabaseError as exc:
        return [f"{snapshot.name}: not a readable SQLite database ({exc})"]
    problems = []
    for name in sorted(set(manifest.tables) - set(actual)):
        problems.append(f"table {name}: missing from the snapshot")
    for name in sorted(set(actual) - set(manifest.tables)):
        problems.append(f"table {name}: not in the manifest")
    for name in sorted(set(actual) & set(manifest.tables)):
        want, got = manifest.tables[name], actual[name]
        if want.rows != got.rows:
            problems.append(f"table {name}: {got.rows} rows, manifest says {want.rows}")
        elif want.digest != got.digest:
            problems.append(f"table {name}: content digest differs (same row count, changed rows)")
    if not problems and logical_digest(actual) != manifest.logical_digest:
        problems.append("logical digest differs from the manifest")
    return problems


def verify(world_dir: Path, *, passes: Path | None = None) -> WorldCheck:
    """Verify snapshot, docs and manifest in ``world_dir``.

    ``passes`` is a folder remembering the checks that passed, by content: a snapshot whose bytes (sha256) and
    manifest (its bytes' sha256) passed every check before skips the one check its bytes already settle, the tables'
    content digests (a few tenths of a second of a run's start); every other check runs. A changed byte of either is
    a new pair, checked in full.

    Raises:
        WorldError: listing every difference (missing files, WAL mode, changed bytes, missing or
            changed tables, changed docs, an unparseable manifest).
    """
    manifest = load_manifest(world_dir / MANIFEST_NAME)
    snapshot = world_dir / manifest.snapshot.path
    passed: Path | None = None
    problems: list[str] = []
    if not snapshot.is_file():
        problems.append(f"missing file: {manifest.snapshot.path}")
    else:
        with snapshot.open("rb") as f:
            header = f.read(100)
        if not header.startswith(SQLITE_HEADER):
            problems.append(f"{snapshot.name}: not an SQLite file (bad header)")
        problems += _journal_problems(snapshot, header)
        sha = file_sha256(snapshot)
        if sha != manifest.snapshot.sha256:
            problems.append(f"{snapshot.name}: sha256 {sha} differs from manifest {manifest.snapshot.sha256}")
        if passes is not None:
            pair = hashlib.sha256(f"{sha}\n{file_sha256(world_dir / MANIFEST_NAME)}\n".encode()).hexdigest()
            passed = passes / pair
        if header.startswith(SQLITE_HEADER) and not (passed is not None and passed.is_file()):
            problems += _table_problems(snapshot, manifest)
    problems += _docs_problems(world_dir, manifest)
    if problems:
        raise WorldError(f"world at {world_dir} does not match its manifest", problems)
    if passed is not None:
        _remember(passed)
    return WorldCheck(manifest=manifest, snapshot=snapshot)


def _remember(passed: Path) -> None:
    # A cache: where it cannot be written, the next start checks in full again.
    try:
        passed.parent.mkdir(parents=True, exist_ok=True)
        passed.touch()
    except OSError:
        pass
