"""The edge that reads what the site is made of: the task set, the ground truth, the world and the rubrics.

Read once per process (a board, a static build); every page after that is a pure function of the result.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

from runner.errors import WorldError
from runner.grading.grades import DIMENSIONS
from runner.grading.rubric import load_rubrics
from runner.paths import scoring_doc, world_dir
from runner.site.model import ColumnSpec, DocPage, Download, SiteSources, TableSpec
from runner.tasks.catalog import catalog
from runner.world import DOCS_DIR, MANIFEST_NAME, SNAPSHOT_NAME
from runner.world.generate import VENDOR_PREFIXES
from runner.world.manifest import load_manifest
from runner.world.tables import VENDOR_TABLES

FIRST_ROWS = 20
"""Rows a table's page shows."""
MAX_CELL_CHARS = 200
"""A longer cell (a policy document) is cut here on a table's page, with an ellipsis."""
_HEADING = re.compile(r"^#\s+(.+)$", re.MULTILINE)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cell(value: object) -> str | int | float | None:
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + "…"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value if isinstance(value, (str, int, float)) or value is None else str(value)


def _first_rows(db: sqlite3.Connection, table: str) -> tuple[tuple[str | int | float | None, ...], ...]:
    # The name comes from the table specs, never from a request.
    rows = db.execute(f'SELECT * FROM "{table}" ORDER BY rowid LIMIT ?', (FIRST_ROWS,)).fetchall()
    return tuple(tuple(_cell(v) for v in row) for row in rows)


def load_sources(world: Path | None = None) -> SiteSources:
    """Read the task set, ground truth, world (manifest, table specs, first rows, docs) and rubrics.

    ``world`` is the world folder (the bundled one by default).

    Raises:
        WorldError: the manifest is malformed, or the snapshot or a docs page is not the one it pins.
        TaskError: the task set or the ground truth does not load.
        RubricError: a rubric does not load.
    """
    world = world or world_dir()
    manifest = load_manifest(world / MANIFEST_NAME)
    snapshot = world / SNAPSHOT_NAME
    snapshot_sha = _sha256(snapshot) if snapshot.is_file() else ""
    if snapshot_sha != manifest.snapshot.sha256:
        raise WorldError(f"{snapshot}: not the snapshot the manifest pins (sha256 {manifest.snapshot.sha256})")
    tables = []
    with sqlite3.connect(f"{snapshot.as_uri()}?mode=ro&immutable=1", uri=True) as db:
        for vendor in VENDOR_PREFIXES:
            for spec in VENDOR_TABLES[vendor]:
                entry = manifest.tables[spec.name]
                columns = tuple(
                    ColumnSpec(name=c.name, type=c.type + ("" if c.nullable else " NOT NULL"), doc=c.doc)
                    for c in spec.columns
                )
                tables.append(
                    TableSpec(
                        name=spec.name, vendor=vendor, doc=spec.doc, rows=entry.rows, digest=entry.digest,
                        primary_key=spec.primary_key, columns=columns, first_rows=_first_rows(db, spec.name),
                    )
                )  # fmt: skip
    db.close()
    docs = []
    for name in ["overview.md", *(f"{v}.md" for v in VENDOR_PREFIXES)]:
        path = world / DOCS_DIR / name
        text = path.read_text(encoding="utf-8")
        if hashlib.sha256(text.encode()).hexdigest() != manifest.docs.get(name):
            raise WorldError(f"{path}: not the docs page the manifest pins")
        heading = _HEADING.search(text)
        docs.append(DocPage(name=name, title=heading.group(1) if heading else name, markdown=text,
                            sha256=manifest.docs[name]))  # fmt: skip
    manifest_file = world / MANIFEST_NAME
    downloads = (
        Download(name=SNAPSHOT_NAME, bytes=manifest.snapshot.bytes, sha256=snapshot_sha),
        Download(name=MANIFEST_NAME, bytes=manifest_file.stat().st_size, sha256=_sha256(manifest_file)),
    )
    truth = catalog().truth
    rubrics = load_rubrics()
    return SiteSources(
        world=world,
        tasks=catalog().tasks,
        truth=truth.tasks,
        truth_digest=truth.ground_truth_digest,
        task_set_digest=truth.task_set_digest,
        manifest=manifest,
        tables=tuple(tables),
        docs=tuple(docs),
        downloads=downloads,
        rubric_questions={d: _rubric_question(rubrics.rubrics[d].text) for d in DIMENSIONS},
        rubric_texts={d: rubrics.rubrics[d].text for d in DIMENSIONS},
        rubric_versions=rubrics.versions(),
        rubric_digest=rubrics.digest,
        scoring_markdown=scoring_doc().read_text(encoding="utf-8"),
    )


def _rubric_question(body: str) -> tuple[str, str]:
    """A rubric's title (its heading) and the question it asks (the first paragraph below the heading)."""
    lines = body.strip().splitlines()
    title = lines[0].lstrip("# ").strip() if lines and lines[0].startswith("#") else ""
    paragraphs = "\n".join(lines[1:]).strip().split("\n\n")
    return title, " ".join(paragraphs[0].split()) if paragraphs else ""
