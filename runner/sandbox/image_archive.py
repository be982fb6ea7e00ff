"""An uploaded image archive read once, as a stream, without trusting it: every blob hashed, the image named by
its content.

:func:`read_image_archive` reads a ``docker save`` stream (the legacy layout Docker 20.10 writes, or the OCI layout
newer engines write) member by member with Python's ``tarfile`` in stream mode, bounded (:class:`ArchiveLimits`):
extended and long-name headers, member names, member count, JSON sizes and the bytes stored and unpacked. Each
regular member's bytes go to a folder named by their sha256 as they are read; a gzip member is also unpacked while
it is hashed, so its uncompressed digest is known without a second pass. Nothing is extracted by name.

Then the layout is followed from the stored blobs: ``manifest.json`` (legacy, also written by newer engines) or,
without it, the OCI ``index.json`` by digest. The image id is ``sha256:`` of the config's bytes as read, never a
member's name; a member whose name claims a digest (``<hex>.json``, ``blobs/sha256/<hex>``) must hash to it; every
layer's uncompressed digest must be the one the config's ``rootfs.diff_ids`` names. What the archive holds beyond
the config and the layers is dropped. The engine never reads the archive: ``runner.sandbox.canonical`` writes the
archive it loads from these verified blobs alone.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shutil
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any, Final, Literal, Protocol, cast

from pydantic import BaseModel, ConfigDict

from runner.errors import SandboxError

CHUNK_BYTES: Final = 1024 * 1024
"""How much of a member is read, hashed and written at a time: the reader's memory, whatever the archive."""
MANIFEST: Final = "manifest.json"
REPOSITORIES: Final = "repositories"
"""The legacy tag file a load applies, as the manifest's ``RepoTags``."""
OCI_INDEX: Final = "index.json"
NAME_ANNOTATIONS: Final = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
"""Annotations of an OCI index that name the image: an engine with the containerd store tags by them on load."""
_HEADER_TYPES: Final = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, *tarfile.GNU_TYPES)
_IMAGE_MANIFEST_TYPES: Final = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_INDEX_TYPES: Final = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
_TAR_BUFFER: Final = 64 * 1024
"""``tarfile``'s read-ahead in stream mode."""
_HEX: Final = re.compile(r"[0-9a-f]{64}")
_MAGIC: Final = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
"""Compressions an engine unpacks that the board does not: a layer in one of them is refused by name."""


class Readable(Protocol):
    """What the reader reads from: a file, or a :class:`StreamReader` over an upload."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes; ``b""`` at the end."""
        ...


class ArchiveRefused(SandboxError):
    """The upload is not an image archive the board takes; the message names the first problem."""


class ArchiveLimits(BaseModel):
    """Bounds on reading one archive: what a hostile one can cost."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    max_header_bytes: int = 64 * 1024
    """One PAX or GNU long-name header: ``docker save`` writes none, other tools a few hundred bytes."""
    max_headers_total: int = 1024 * 1024
    """Every such header of the archive together."""
    max_name_bytes: int = 1024
    """A member name or link target, UTF-8."""
    max_members: int = 10_000
    """A ``docker save`` holds a few members per layer, and an image has at most 127 layers."""
    max_json_bytes: int = 4 * 1024 * 1024
    """A manifest, index or config larger than this is not one an engine wrote."""
    max_stored_bytes: int = 8 * 1024**3
    """The members' bytes kept on disk while the layout is followed."""
    max_unpacked_bytes: int = 32 * 1024**3
    """The bytes of gzip members once unpacked, together: a compression bomb stops here."""


class Blob(BaseModel):
    """One regular member's bytes as read, stored under their digest."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    digest: str
    """``sha256:<hex>`` of the bytes as they are in the archive."""
    size: int
    """Their length."""
    diff_digest: str
    """``sha256:<hex>`` of the bytes unpacked (gzip), or ``digest`` for a member stored plain."""
    diff_size: int
    """The unpacked length."""
    gzip: bool
    """Whether the bytes are gzip-compressed (a layer in an OCI layout may be)."""


class VerifiedImage(BaseModel):
    """The one image of an archive, each part checked against its digest; its blobs are in ``folder``."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    image_id: str
    """``sha256:<hex>`` of the config's bytes: the id any engine gives the image."""
    config: Blob
    """The image config, as read."""
    layers: list[Blob]
    """The layers, base first; layer *i*'s ``diff_digest`` is the config's ``rootfs.diff_ids[i]``."""
    labels: dict[str, str]
    """The image's labels, from its config."""
    layout: Literal["docker-save", "oci"]
    """Which file the image was found by: the legacy ``manifest.json`` or the OCI ``index.json``."""
    named_by: dict[str, str]
    """Names the archive gives the image, by the file that gives them (``manifest.json``'s ``RepoTags``, a
    ``repositories`` file, ``index.json``'s name annotations), as JSON; empty for an archive saved by id."""
    folder: Path
    """Where the blobs are, each named by the hex of its digest."""

    def path(self, blob: Blob) -> Path:
        """Where ``blob``'s bytes are."""
        return self.folder / blob.digest.removeprefix("sha256:")


class _BoundedInfo(tarfile.TarInfo):
    """``tarfile``'s member header with bounds, checked before ``tarfile`` reads an extended header into memory.

    ``_proc_member`` is the extension point ``tarfile`` documents in its source for subclasses; the bound is
    proved against the pinned Python by ``tests/test_board_archive.py`` (a 1 GiB PAX header costs a few MiB).
    """

    limits: ArchiveLimits = ArchiveLimits()

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveRefused("refused: the archive holds a sparse file, which no image archive does")
        if self.type in _HEADER_TYPES:
            if self.size > self.limits.max_header_bytes:
                raise ArchiveRefused(
                    f"refused: a tar extended header of {self.size} bytes (the limit is {self.limits.max_header_bytes})"
                )
            spent = getattr(tarfile_, "header_bytes", 0) + self.size
            if spent > self.limits.max_headers_total:
                raise ArchiveRefused(
                    f"refused: the archive's extended headers pass {self.limits.max_headers_total} bytes together"
                )
            tarfile_.header_bytes = spent  # type: ignore[attr-defined]
        return super()._proc_member(tarfile_)  # type: ignore[misc, no-any-return]

    def _proc_gnusparse_10(self, next: Any, pax_headers: Any, tarfile_: Any) -> None:
        # GNU sparse 1.0 reads a map of any length from the data: never in an image archive.
        raise ArchiveRefused("refused: the archive holds a sparse file, which no image archive does")


def _bounded_info(limits: ArchiveLimits) -> type[tarfile.TarInfo]:
    return type("BoundedInfo", (_BoundedInfo,), {"limits": limits})


def _checked_name(name: str, limits: ArchiveLimits, what: str = "member name") -> str:
    """``name`` normalised as an engine's untar reads it (``./a//b`` is ``a/b``), or a refusal naming why."""
    if len(name.encode("utf-8", "surrogateescape")) > limits.max_name_bytes:
        raise ArchiveRefused(f"refused: a {what} of over {limits.max_name_bytes} bytes ({name[:80]!r}...)")
    bad = next((c for c in name if ord(c) < 0x20 or ord(c) == 0x7F or c == "\\"), None)
    if bad is not None:
        raise ArchiveRefused(f"refused: the {what} {name!r} holds the character U+{ord(bad):04X}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ArchiveRefused(f"refused: the {what} {name!r} is not UTF-8") from exc
    normal = posixpath.normpath(name) if name else ""
    path = PurePosixPath(normal)
    if not normal or path.is_absolute() or ".." in path.parts:
        raise ArchiveRefused(f"refused: the {what} {name!r} leaves the archive")
    return normal


class _Store:
    """Regular members' bytes on disk by digest, and what each name holds."""

    def __init__(self, folder: Path, limits: ArchiveLimits) -> None:
        self.folder = folder
        self.limits = limits
        self.files: dict[str, Blob] = {}
        """Regular members by normalised name."""
        self.by_digest: dict[str, Blob] = {}
        self.links: dict[str, str] = {}
        """Links by normalised name: the normalised name they point at."""
        self.dirs: set[str] = set()
        self.originals: dict[str, str] = {}
        """Each normalised name as the archive spelled it, for messages."""
        self.stored = 0
        self.unpacked = 0

    def claim(self, name: str, spelled: str) -> None:
        first = self.originals.get(name)
        if first is not None:
            raise ArchiveRefused(f"refused: the archive holds {name!r} twice ({first!r} and {spelled!r})")
        self.originals[name] = spelled

    def add(self, name: str, source: IO[bytes]) -> None:
        blob = self._write(source)
        self.files[name] = blob
        self.by_digest.setdefault(blob.digest, blob)

    def _write(self, source: IO[bytes]) -> Blob:
        raw, unpacked = hashlib.sha256(), hashlib.sha256()
        size = diff_size = 0
        gunzip: Gunzip | None = None
        scratch = self.folder / f"partial-{len(self.files)}"
        with scratch.open("wb") as out:
            while chunk := source.read(CHUNK_BYTES):
                if size == 0 and chunk[:2] == GZIP_MAGIC:
                    gunzip = Gunzip()
                size += len(chunk)
                self.stored += len(chunk)
                if self.stored > self.limits.max_stored_bytes:
                    raise ArchiveRefused(f"refused: the archive's members pass {self.limits.max_stored_bytes} bytes")
                raw.update(chunk)
                out.write(chunk)
                if gunzip is not None:
                    gunzip, grown = self._unpack(gunzip, chunk, unpacked)
                    diff_size += grown
        hex_digest = raw.hexdigest()
        scratch.replace(self.folder / hex_digest)
        digest = f"sha256:{hex_digest}"
        if gunzip is None or not gunzip.whole:  # plain, or a gzip that broke: the engine would read it as it is
            return Blob(digest=digest, size=size, diff_digest=digest, diff_size=size, gzip=False)
        diff_digest = f"sha256:{unpacked.hexdigest()}"
        return Blob(digest=digest, size=size, diff_digest=diff_digest, diff_size=diff_size, gzip=True)

    def _unpack(self, gunzip: Gunzip, chunk: bytes, digest: Any) -> tuple[Gunzip | None, int]:
        grown = 0
        try:
            for out in gunzip.feed(chunk):
                grown += len(out)
                self.unpacked += len(out)
                if self.unpacked > self.limits.max_unpacked_bytes:
                    raise ArchiveRefused(
                        f"refused: the archive's gzip members unpack past {self.limits.max_unpacked_bytes} bytes"
                    )
                digest.update(out)
        except zlib.error:
            return None, grown  # not gzip after all: hashed as the bytes it is
        return gunzip, grown


GZIP_MAGIC: Final = b"\x1f\x8b"


class Gunzip:
    """A gzip stream unpacked as it is fed, at most ``CHUNK_BYTES`` out at a time; the members of a multi-member
    gzip in turn."""

    def __init__(self) -> None:
        """Start before the stream's first byte."""
        self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)

    @property
    def whole(self) -> bool:
        """Whether what was fed ends at the end of a gzip member."""
        return bool(self._inflate.eof)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The unpacked bytes of ``data``, in pieces.

        Raises:
            zlib.error: ``data`` does not continue a gzip stream.
        """
        while data:
            if self._inflate.eof:
                self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = self._inflate.decompress(data, CHUNK_BYTES)
            if out:
                yield out
            data = self._inflate.unused_data if self._inflate.eof else self._inflate.unconsumed_tail


def read_image_archive(source: Readable, folder: Path, limits: ArchiveLimits | None = None) -> VerifiedImage:
    """Read the archive streamed from ``source`` into ``folder`` (made empty first) and verify its one image.

    Raises:
        ArchiveRefused: naming the first problem: not a tar, a header, name or size past ``limits``, a link, device
            or name outside the archive, two members of one name, no manifest or index, not exactly one image, a
            blob that does not hash to the digest that names it, a layer whose digest is not the config's.
    """
    limits = limits or ArchiveLimits()
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    store = _Store(folder, limits)
    _read_members(source, store, limits)
    aliases = _resolve_links(store)
    image = _follow_layout(store, aliases, limits)
    kept = {image.config.digest.removeprefix("sha256:"), *(b.digest.removeprefix("sha256:") for b in image.layers)}
    for path in folder.iterdir():
        if path.name not in kept:
            path.unlink()  # what the archive holds beyond the image is never used
    return image


def _read_members(source: Readable, store: _Store, limits: ArchiveLimits) -> None:
    try:
        reader = cast(IO[bytes], source)
        tar = tarfile.open(fileobj=reader, mode="r|", tarinfo=_bounded_info(limits), bufsize=_TAR_BUFFER)  # noqa: SIM115
    except tarfile.TarError as exc:
        raise ArchiveRefused(f"not a docker save archive: not an uncompressed tar ({exc})") from exc
    with tar:
        count = 0
        try:
            while (member := tar.next()) is not None:
                count += 1
                if count > limits.max_members:
                    raise ArchiveRefused(f"refused: the archive has over {limits.max_members} members")
                _take(tar, member, store, limits)
        except tarfile.TarError as exc:
            raise ArchiveRefused(f"not a docker save archive: a damaged tar ({exc})") from exc
        except EOFError as exc:
            raise ArchiveRefused("not a docker save archive: the tar ends in the middle of a member") from exc


def _take(tar: tarfile.TarFile, member: tarfile.TarInfo, store: _Store, limits: ArchiveLimits) -> None:
    name = _checked_name(member.name, limits)
    if member.isdir():
        if name != ".":
            store.claim(name, member.name)
            store.dirs.add(name)
        return
    if name == ".":
        raise ArchiveRefused(f"refused: the member {member.name!r} is not a directory but names the archive's root")
    store.claim(name, member.name)
    if member.issym() or member.islnk():
        store.links[name] = _link_target(member, name, limits)
        return
    if not member.isreg():
        raise ArchiveRefused(f"refused: {member.name!r} is a device, fifo or other special file")
    data = tar.extractfile(member)
    if data is None:  # pragma: no cover (a regular member always has a reader)
        raise ArchiveRefused(f"not a docker save archive: {member.name!r} cannot be read")
    store.add(name, data)


def _link_target(member: tarfile.TarInfo, name: str, limits: ArchiveLimits) -> str:
    """The normalised name a link points at (a symlink's relative to its folder, a hard link's to the root)."""
    joined = posixpath.join(posixpath.dirname(name), member.linkname) if member.issym() else member.linkname
    try:
        return _checked_name(joined, limits, "link target")
    except ArchiveRefused as exc:
        if "leaves the archive" not in str(exc) and member.linkname:
            raise
        raise ArchiveRefused(f"refused: {member.name!r} links outside the archive ({member.linkname!r})") from exc


def _resolve_links(store: _Store) -> dict[str, Blob]:
    """Each link as the regular member it names. A link is taken only as another name of a regular member (as
    ``docker save`` writes a layer that appears twice); a link to a directory, to a link, to nothing, or a name
    that passes through a link, is refused."""
    aliases: dict[str, Blob] = {}
    for name, target in sorted(store.links.items()):
        blob = store.files.get(target)
        if blob is None:
            kind = "a directory" if target in store.dirs or target == "." else (
                "another link" if target in store.links else "nothing the archive holds"
            )  # fmt: skip
            raise ArchiveRefused(f"refused: the link {store.originals[name]!r} points at {target!r}, {kind}")
        aliases[name] = blob
    for name in store.originals:
        parents = PurePosixPath(name).parents
        through = next((str(p) for p in parents if str(p) in store.links), None)
        if through is not None:
            raise ArchiveRefused(f"refused: the member {store.originals[name]!r} passes through the link {through!r}")
    return aliases


def _json(store: _Store, blob: Blob, what: str, limits: ArchiveLimits) -> Any:
    if blob.size > limits.max_json_bytes:
        raise ArchiveRefused(
            f"not a docker save archive: {what} is {blob.size} bytes (the limit is {limits.max_json_bytes})"
        )
    try:
        return json.loads((store.folder / blob.digest.removeprefix("sha256:")).read_bytes())
    except ValueError as exc:
        raise ArchiveRefused(f"not a docker save archive: {what} is not JSON ({exc})") from exc


def _follow_layout(store: _Store, aliases: dict[str, Blob], limits: ArchiveLimits) -> VerifiedImage:
    by_name = {**store.files, **aliases}
    named_by: dict[str, str] = {}
    index = _json(store, by_name[OCI_INDEX], OCI_INDEX, limits) if OCI_INDEX in by_name else None
    if index is not None:
        names = _index_names(index)
        if names:
            named_by[OCI_INDEX] = _shown(names)
    if REPOSITORIES in by_name:
        repositories = _json(store, by_name[REPOSITORIES], REPOSITORIES, limits)
        if repositories:
            named_by[REPOSITORIES] = _shown(repositories)
    if MANIFEST in by_name:
        manifest = _json(store, by_name[MANIFEST], MANIFEST, limits)
        config, layers, tags = _legacy_parts(manifest, by_name)
        if tags:
            named_by[MANIFEST] = _shown(tags)
        layout: Literal["docker-save", "oci"] = "docker-save"
    elif index is not None:
        config, layers = _oci_parts(index, store, limits)
        layout = "oci"
    else:
        raise ArchiveRefused(f"not a docker save archive: it has neither {MANIFEST} nor {OCI_INDEX}")
    return _verified(store, config, layers, layout, named_by, limits)


def _legacy_parts(manifest: Any, by_name: dict[str, Blob]) -> tuple[Blob, list[tuple[str, Blob]], Any]:
    """The config and layers ``manifest.json`` names, each checked against a digest its name claims."""
    if not isinstance(manifest, list) or not all(isinstance(m, dict) for m in manifest):
        raise ArchiveRefused(f"not a docker save archive: {MANIFEST} is not a list of images")
    if len(manifest) != 1:
        raise ArchiveRefused(f"the archive holds {len(manifest)} images; submit exactly one")
    (entry,) = manifest
    config_name, layer_names = entry.get("Config"), entry.get("Layers")
    if not isinstance(config_name, str) or not isinstance(layer_names, list) or not layer_names:
        raise ArchiveRefused("not a docker save archive: the manifest names no config or no layers")
    found: list[tuple[str, Blob]] = []
    for name in [config_name, *layer_names]:
        normal = posixpath.normpath(name) if isinstance(name, str) and name else ""
        blob = by_name.get(normal)
        if blob is None:
            raise ArchiveRefused(f"not a docker save archive: {name!r} is named in {MANIFEST} but not in the archive")
        _check_claim(name, blob)
        found.append((name, blob))
    return found[0][1], found[1:], entry.get("RepoTags")


def _check_claim(name: str, blob: Blob) -> None:
    """A member named for a digest (``<hex>.json``, ``blobs/sha256/<hex>``) must hash to it."""
    path = PurePosixPath(name)
    stem = path.name.removesuffix(".json")
    claimed = stem if _HEX.fullmatch(stem) and (path.name.endswith(".json") or path.parent.name == "sha256") else None
    if claimed is not None and blob.digest != f"sha256:{claimed}":
        raise ArchiveRefused(f"refused: {name!r} is named for sha256:{claimed} but its bytes hash to {blob.digest}")


def _oci_parts(index: Any, store: _Store, limits: ArchiveLimits) -> tuple[Blob, list[tuple[str, Blob]]]:
    """The config and layers an OCI index leads to, every step by digest: the one image manifest (through a nested
    index, the one for ``linux/amd64``)."""
    manifest = index
    for _ in range(3):  # an index, at most one nested index, then the manifest
        descriptors = manifest.get("manifests") if isinstance(manifest, dict) else None
        if descriptors is None:
            break
        if not isinstance(descriptors, list) or not all(isinstance(d, dict) for d in descriptors):
            raise ArchiveRefused(f"not a docker save archive: {OCI_INDEX} lists no manifests")
        if len(descriptors) > 1:
            descriptors = [d for d in descriptors if _for_this_platform(d)]
        if len(descriptors) != 1:
            raise ArchiveRefused(f"the archive holds {len(descriptors)} images; submit exactly one")
        blob = _by_descriptor(descriptors[0], store, "the manifest")
        manifest = _json(store, blob, f"the manifest {blob.digest}", limits)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise ArchiveRefused("not a docker save archive: the OCI manifest names no config")
    media = manifest.get("mediaType")
    if media is not None and media not in _IMAGE_MANIFEST_TYPES:
        raise ArchiveRefused(f"not a docker save archive: the manifest's media type is {str(media)[:100]!r}")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(d, dict) for d in layers):
        raise ArchiveRefused("not a docker save archive: the OCI manifest names no layers")
    config = _by_descriptor(manifest["config"], store, "the config")
    return config, [(f"layer {n}", _by_descriptor(d, store, f"layer {n}")) for n, d in enumerate(layers)]


def _for_this_platform(descriptor: dict[str, Any]) -> bool:
    platform = descriptor.get("platform")
    return isinstance(platform, dict) and platform.get("os") == "linux" and platform.get("architecture") == "amd64"


def _by_descriptor(descriptor: Any, store: _Store, what: str) -> Blob:
    digest = descriptor.get("digest") if isinstance(descriptor, dict) else None
    if not isinstance(digest, str) or not digest.startswith("sha256:") or not _HEX.fullmatch(digest[7:]):
        raise ArchiveRefused(f"not a docker save archive: {what} has no sha256 digest")
    blob = store.by_digest.get(digest)
    if blob is None:
        raise ArchiveRefused(f"not a docker save archive: no member of the archive hashes to {what}'s digest {digest}")
    if descriptor.get("size") != blob.size:
        said = descriptor.get("size")
        raise ArchiveRefused(f"refused: {what} {digest} is {blob.size} bytes; its descriptor says {said!r}")
    return blob


def _verified(
    store: _Store,
    config: Blob,
    layers: list[tuple[str, Blob]],
    layout: Literal["docker-save", "oci"],
    named_by: dict[str, str],
    limits: ArchiveLimits,
) -> VerifiedImage:
    body = _json(store, config, "the image config", limits)
    rootfs = body.get("rootfs") if isinstance(body, dict) else None
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or not all(isinstance(d, str) for d in diff_ids):
        raise ArchiveRefused("not a docker save archive: the image config has no rootfs.diff_ids")
    if len(diff_ids) != len(layers):
        raise ArchiveRefused(f"refused: the config names {len(diff_ids)} layers; the archive gives {len(layers)}")
    for n, ((name, blob), expected) in enumerate(zip(layers, diff_ids, strict=True)):
        if blob.diff_digest != expected:
            why = _unread_compression(store.folder / blob.digest.removeprefix("sha256:"))
            raise ArchiveRefused(
                f"refused: layer {n} ({name[:100]!r}) hashes to {blob.diff_digest} unpacked; the config's "
                f"rootfs.diff_ids names {expected[:80]}{why}"
            )
    image_config = body.get("config") if isinstance(body, dict) else None
    labels = image_config.get("Labels") if isinstance(image_config, dict) else None
    return VerifiedImage(
        image_id=config.digest, config=config, layers=[blob for _, blob in layers],
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        layout=layout, named_by=named_by, folder=store.folder,
    )  # fmt: skip


def _unread_compression(path: Path) -> str:
    with path.open("rb") as handle:
        head = handle.read(8)
    found = next((kind for magic, kind in _MAGIC.items() if head.startswith(magic)), None)
    return f" (the layer is {found}-compressed: the board unpacks gzip only)" if found else ""


def _index_names(index: Any) -> dict[str, Any]:
    descriptors = index.get("manifests") if isinstance(index, dict) else None
    holders = [index, *descriptors] if isinstance(descriptors, list) else [index]
    named: dict[str, Any] = {}
    for holder in holders:
        annotations = holder.get("annotations") if isinstance(holder, dict) else None
        if isinstance(annotations, dict):
            named.update({k: v for k, v in annotations.items() if k in NAME_ANNOTATIONS})
    return named


def _shown(value: Any) -> str:
    return json.dumps(value)[:200]


class StreamReader:
    """A file object over a function that returns the next chunk of a stream (``b""`` at its end), so ``tarfile``
    can read an upload as it arrives."""

    def __init__(self, next_chunk: Callable[[], bytes]) -> None:
        """Read through ``next_chunk``."""
        self._next = next_chunk
        self._chunk = b""
        self._offset = 0
        self._done = False

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left for a negative ``size``); ``b""`` only at the end."""
        parts: list[bytes] = []
        wanted = size
        while wanted != 0:
            if self._offset >= len(self._chunk):
                if self._done:
                    break
                self._chunk, self._offset = self._next(), 0
                if not self._chunk:
                    self._done = True
                    break
            end = len(self._chunk) if wanted < 0 else min(len(self._chunk), self._offset + wanted)
            parts.append(self._chunk[self._offset : end])
            if wanted > 0:
                wanted -= end - self._offset
            self._offset = end
        return b"".join(parts)
