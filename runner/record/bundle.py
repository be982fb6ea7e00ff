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
import zlib
from pathlib import Path, PurePosixPath

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


# ----------------------------------------------------------------------------------------------- reading
# A bundle is the submitter's: every reader streams it, member by member, and bounds what it takes in.
MAX_MANIFEST_BYTES = 16 * 1024**2
"""``MANIFEST.json`` (a line per file) may not be larger."""
MAX_JOURNAL_BYTES = 1024**3
"""``journal.jsonl`` may not be larger (a 1,000-sample run with every vote's rationale is tens of MB)."""
MAX_RECORD_BYTES = 256 * 1024**2
"""``record.json`` may not be larger."""
MAX_FILE_BYTES = 256 * 1024**2
"""Any other file (a transcript part, a page, the report) may not be larger."""
MAX_BUNDLE_BYTES = 4 * 1024**3
"""All files of one bundle together may not be larger, unpacked."""
_CHUNK = 1 << 20


class BundleRefused(BundleError):
    """A bundle that is not read further: a member its manifest does not list, a repeated name, or a member over
    its size cap. Said before the member's bytes are read."""


def size_cap(name: str) -> int:
    """The largest a bundle's file ``name`` (its path inside the run folder) may be."""
    if name == "journal.jsonl":
        return MAX_JOURNAL_BYTES
    if name == "record.json":
        return MAX_RECORD_BYTES
    return MAX_FILE_BYTES


def read_manifest(tar: tarfile.TarFile, source: Path) -> BundleManifest:
    """The manifest, which :func:`bundle` writes as the archive's first member, read within its cap.

    Raises:
        BundleError: the first member is not a ``MANIFEST.json`` within its cap, or not a valid manifest.
    """
    first = tar.next()
    if first is None or first.name != MANIFEST_NAME or not first.isfile():
        raise BundleError(f"{source} is not a bundle: its first member is not {MANIFEST_NAME}")
    if first.size > MAX_MANIFEST_BYTES:
        raise BundleError(f"{source}: {MANIFEST_NAME} is {first.size} bytes, over its cap of {MAX_MANIFEST_BYTES}")
    handle = tar.extractfile(first)
    assert handle is not None  # a regular file always has contents
    try:
        return BundleManifest.model_validate_json(handle.read(MAX_MANIFEST_BYTES + 1))
    except ValueError as exc:
        raise BundleError(f"{source}: {MANIFEST_NAME} is malformed: {exc}") from exc


def unpack_checked(source: Path, into: Path) -> tuple[BundleManifest, dict[str, str]]:
    """Stream the bundle at ``source`` into the folder ``into/<run>``: each listed file written as it is read and
    hashed on the way, never held in memory. Returns the manifest and the sha256 of each file found, by name.

    Raises:
        BundleRefused: before the bytes of a member that is not listed in the manifest, has a repeated name, or is
            over its size cap (or the bundle over its total); the archive is not read further.
        BundleError: the archive is not a readable tar.gz or not a bundle (no manifest first, a member with an
            unsafe name or not a regular file).
    """
    found: dict[str, str] = {}
    try:
        with tarfile.open(source, mode="r|gz") as tar:
            manifest = read_manifest(tar, source)
            prefix, total = f"{manifest.run}/", 0
            run_dir = into / manifest.run
            for member in tar:
                if member.offset == 0:
                    continue  # the manifest (first, at offset 0), read above: iterating a tar starts again from it
                name = member.name.removeprefix(prefix)
                rel = PurePosixPath(name)
                if not member.name.startswith(prefix) or rel.is_absolute() or ".." in rel.parts or not name:
                    raise BundleError(f"{source}: unsafe or foreign member name {member.name!r}")
                if not member.isfile():
                    raise BundleError(f"{source}: member {member.name!r} is not a regular file")
                if name not in manifest.files:
                    raise BundleRefused(
                        f"{name} is in the archive but not listed in {MANIFEST_NAME}: refused unread "
                        f"({member.size} bytes); the archive was not read further"
                    )
                if name in found:
                    raise BundleRefused(f"{name} is in the archive twice; the archive was not read further")
                if member.size > size_cap(name) or total + member.size > MAX_BUNDLE_BYTES:
                    raise BundleRefused(
                        f"{name} is {member.size} bytes, over its cap of {size_cap(name)} (or the bundle's "
                        f"{MAX_BUNDLE_BYTES} in all): refused unread; the archive was not read further"
                    )
                total += member.size
                found[name] = _write_hashed(tar, member, run_dir / rel)
            run_dir.mkdir(parents=True, exist_ok=True)
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raise BundleError(f"{source} is not a readable bundle: {exc}") from exc
    return manifest, found


def _write_hashed(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> str:
    handle = tar.extractfile(member)
    assert handle is not None  # a regular file always has contents
    digest = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def read_member(source: Path, name: str) -> bytes | None:
    """The bytes of the run file ``name`` (path inside the run folder) of the bundle at ``source``, read as a stream
    within its cap; ``None`` when the bundle does not hold it, holds it over its cap, or cannot be read."""
    try:
        with tarfile.open(source, mode="r|gz") as tar:
            manifest = read_manifest(tar, source)
            for member in tar:
                if member.offset != 0 and member.name == f"{manifest.run}/{name}" and member.isfile():
                    if member.size > size_cap(name):
                        return None
                    handle = tar.extractfile(member)
                    return handle.read(size_cap(name) + 1) if handle is not None else None
    except (OSError, tarfile.TarError, EOFError, zlib.error, BundleError):
        return None
    return None
