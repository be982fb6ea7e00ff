"""The world manifest: what the snapshot is, and the digests every run checks before it starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import WorldError


class SnapshotFile(BaseModel):
    """The SQLite file itself."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File name, relative to the world folder.")
    sha256: str = Field(description="sha256 of the file's bytes.")
    bytes: int = Field(description="File size.")
    sqlite_version: str = Field(description="SQLite library version that wrote the file (informational).")
    journal_mode: Literal["delete"] = Field(description="Always `delete`: no WAL sidecar files.")


class TableEntry(BaseModel):
    """One table's row count and logical digest."""

    model_config = ConfigDict(extra="forbid")

    vendor: str
    rows: int
    digest: str


class WorldManifest(BaseModel):
    """``world/manifest.json``. The publisher's manifest named only dataset and date; v1 adds digests."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    dataset: Literal["ispm-crossvendor-v1"]
    revision: str = Field(description="Revision of the dataset within v1; any content change is a new dataset id.")
    publish_date: str = Field(description="ISO date the dataset was published.")
    as_of: str = Field(description="The fixed moment the snapshot describes (UTC). 'Now' means this.")
    generator_version: str
    seed: int
    snapshot: SnapshotFile
    logical_digest: str = Field(description="sha256 over per-table digests; independent of SQLite's page layout.")
    tables: dict[str, TableEntry]
    docs: dict[str, str] = Field(description="sha256 of every agent-visible docs page, by file name.")


def load_manifest(path: Path) -> WorldManifest:
    """Read and validate a manifest. Raises ``WorldError`` naming the file and what is wrong."""
    if not path.is_file():
        raise WorldError(f"missing file: {path}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise WorldError(f"manifest does not parse: {path}: {exc}") from exc
    try:
        return WorldManifest.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise WorldError(f"manifest is not a valid world manifest: {path}", problems) from exc


def write_manifest(path: Path, manifest: WorldManifest) -> None:
    """Write the manifest as stable, diff-friendly JSON."""
    path.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n", encoding="utf-8")
