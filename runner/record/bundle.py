"""``ispm bundle``: one deterministic archive of a run folder, for submission.

The archive is a gzip-compressed tar whose entries sit under the run folder's name, sorted, with a fixed
mtime, uid, gid and mode, so bundling the same folder twice gives the same bytes. ``MANIFEST.json`` at the
archive's root lists the sha256 of every other file; :func:`runner.record.audit.audit` checks each file
against it before auditing the run inside.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runner.errors import IspmError

MANIFEST_NAME = "MANIFEST.json"
BUNDLE_VERSION = 1
# Fixed metadata: any clock, user or umask would otherwise leak into the archive's bytes.
_MTIME = 0
_MODE = 0o644
# Scratch files of an atomic write are never part of the run.
_SKIP_SUFFIXES = (".tmp",)


class BundleError(IspmError):
    """A run folder cannot be bundled: it is missing, empty, or a file cannot be read or written."""


class BundleManifest(BaseModel):
    """``MANIFEST.json``: the run folder's name and the sha256 of every file, by path inside the run folder."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    version: int = BUNDLE_VERSION
    run: str
    files: dict[str, str]


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def run_files(run_dir: Path) -> list[Path]:
    """Every regular file under ``run_dir``, sorted by relative POSIX path (scratch files excluded)."""
    found = [p for p in run_dir.rglob("*") if p.is_file() and not p.name.endswith(_SKIP_SUFFIXES)]
    return sorted(found, key=lambda p: p.relative_to(run_dir).as_posix())


def default_bundle_path(run_dir: Path) -> Path:
    """Where ``ispm bundle`` writes without ``-o``: ``<run-id>.tar.gz`` beside the run folder."""
    return run_dir.parent / f"{run_dir.name}.tar.gz"


def bundle(run_dir: Path, out_path: Path) -> Path:
    """Write ``run_dir`` as one deterministic ``tar.gz`` at ``out_path`` with ``MANIFEST.json``; return the path.

    Raises:
        BundleError: ``run_dir`` is not a folder, holds no files, or a file cannot be read, or ``out_path``
            cannot be written (or lies inside ``run_dir``, which would bundle itself).
    """
    run_dir = run_dir.resolve()
    if not run_dir.is_dir():
        raise BundleError(f"not a run folder: {run_dir}")
    out_path = out_path.resolve()
    if out_path.is_relative_to(run_dir):
        raise BundleError(f"the bundle {out_path} must not be written inside the run folder {run_dir}")
    files = run_files(run_dir)
    if not files:
        raise BundleError(f"the run folder {run_dir} holds no files")
    contents: dict[str, bytes] = {}
    for path in files:
        try:
            contents[path.relative_to(run_dir).as_posix()] = path.read_bytes()
        except OSError as exc:
            raise BundleError(f"cannot read {path}: {exc}") from exc
    manifest = BundleManifest(run=run_dir.name, files={name: sha256_bytes(data) for name, data in contents.items()})
    manifest_bytes = (json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n").encode()

    raw = io.BytesIO()
    # gzip writes its own mtime into the header; pin it, and leave the file name out, for identical bytes.
    with (
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=_MTIME) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        _add(tar, MANIFEST_NAME, manifest_bytes)
        for name in sorted(contents):
            _add(tar, f"{run_dir.name}/{name}", contents[name])
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_bytes(raw.getvalue())
    except OSError as exc:
        raise BundleError(f"cannot write the bundle {out_path}: {exc}") from exc
    return out_path


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = _MTIME
    info.mode = _MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))
