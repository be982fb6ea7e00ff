"""Quarantine: check a ``docker save`` archive without trusting it, then load it untagged under a board tag.

:func:`inspect_archive` reads only the archive's index, ``manifest.json``, any ``repositories`` or OCI
``index.json``, and the image config (never a layer). Every member name is normalised as the engine's untar
normalises it (``./manifest.json`` and ``a/../manifest.json`` are ``manifest.json``); it must stay inside the
archive, and no two members may share a normalised name (the engine would read the last). The manifest must name
exactly one image whose files are present, the config must carry the contract label
``ispm.agent.contract=ispm.agent/v1``, and nothing may carry a name the engine would apply on load (``RepoTags``,
``repositories``, OCI ``org.opencontainers.image.ref.name`` or ``io.containerd.image.name``): ``ispm submit`` saves
the image by id, without names.

:func:`load_image` then loads a copy that Python wrote afresh from what it read (normalised names, no tags, no
``repositories``), so the engine's tar reader cannot see another archive than the one checked, and tags the result
itself. After the load, every tag that points at the loaded image and did not before is put back and the
submission is refused as an attack (``runner.sandbox.tags``).
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import re
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from runner import log
from runner.board.errors import BoardError
from runner.contract import AGENT_CONTRACT
from runner.errors import SandboxError
from runner.sandbox.transfer import ImageLoadRefused, TagsMoved, load_and_tag, remove_tag

CONTRACT_LABEL: Final = "ispm.agent.contract"
MANIFEST: Final = "manifest.json"
REPOSITORIES: Final = "repositories"
"""The legacy tag file a load applies, as the manifest's ``RepoTags``."""
OCI_INDEX: Final = "index.json"
NAME_ANNOTATIONS: Final = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
"""Annotations of an OCI index that name the image: an engine with the containerd store tags by them on load."""
MAX_MEMBERS: Final = 10_000
"""A ``docker save`` holds a few members per layer, and an image has at most 127 layers."""
_MAX_JSON: Final = 4 * 1024 * 1024
"""A manifest or config larger than this is not one ``docker save`` wrote."""


class ImageArchive(BaseModel):
    """What the archive says about its one image."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    image_id: str
    """``sha256:<hex>`` of the config: the id the engine gives the loaded image."""
    config_name: str
    """The config's member name in the archive."""
    layers: list[str]
    """The layers' member names, base first."""
    labels: dict[str, str]
    """The image's labels, from its config."""


_log = log.get(__name__)


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def normal_name(name: str) -> str:
    """``name`` as the engine's untar reads it (``filepath.Clean``): ``./a//b/`` and ``c/../a/b`` are ``a/b``."""
    return posixpath.normpath(name)


def _link_inside(member: tarfile.TarInfo) -> bool:
    if member.issym():
        target = PurePosixPath(member.name).parent / member.linkname
        return not PurePosixPath(member.linkname).is_absolute() and _normal_inside(target)
    return _safe_name(member.linkname)


def _normal_inside(path: PurePosixPath) -> bool:
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def _read_json(tar: tarfile.TarFile, member: tarfile.TarInfo, what: str) -> Any:
    if member.size > _MAX_JSON:
        raise BoardError(f"not a docker save archive: {what} is {member.size} bytes", status=422)
    handle = tar.extractfile(member)
    if handle is None:
        raise BoardError(f"not a docker save archive: {what} is not a file", status=422)
    try:
        return json.loads(handle.read())
    except ValueError as exc:
        raise BoardError(f"not a docker save archive: {what} is not JSON ({exc})", status=422) from exc


def inspect_archive(path: Path) -> ImageArchive:
    """Check the archive at ``path`` and describe its one image.

    Raises:
        BoardError: 422 naming the first problem: not a tar, an unsafe member name or link (path traversal),
            no ``manifest.json``, not exactly one image, a missing config or layer, or no contract label.
    """
    try:
        tar = tarfile.open(path, mode="r:")  # noqa: SIM115 (closed by the `with tar:` below, once open)
    except (tarfile.TarError, OSError) as exc:
        raise BoardError(f"not a docker save archive: not an uncompressed tar ({exc})", status=422) from exc
    with tar:
        members = _members(tar)
        by_name: dict[str, tarfile.TarInfo] = {}
        for member in members:
            normal = normal_name(member.name)
            if not _safe_name(normal):
                raise BoardError(f"refused: the member name {member.name!r} leaves the archive", status=422)
            if (member.issym() or member.islnk()) and not _link_inside(member):
                raise BoardError(
                    f"refused: {member.name!r} links outside the archive ({member.linkname!r})", status=422
                )
            if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                raise BoardError(f"refused: {member.name!r} is a device, fifo or other special file", status=422)
            if normal == "." and member.isdir():
                continue  # the archive's own root, as ``tar -C dir .`` writes it
            if normal in by_name:
                first = by_name[normal].name
                raise BoardError(
                    f"refused: the archive holds {normal!r} twice ({first!r} and {member.name!r})", status=422
                )
            by_name[normal] = member
        if MANIFEST not in by_name:
            raise BoardError("not a docker save archive: it has no manifest.json", status=422)
        manifest = _read_json(tar, by_name[MANIFEST], MANIFEST)
        _refuse_names(tar, by_name, manifest)
        if not isinstance(manifest, list) or not all(isinstance(m, dict) for m in manifest):
            raise BoardError("not a docker save archive: manifest.json is not a list of images", status=422)
        if len(manifest) != 1:
            raise BoardError(f"the archive holds {len(manifest)} images; submit exactly one", status=422)
        (entry,) = manifest
        config_name, layers = entry.get("Config"), entry.get("Layers")
        if not isinstance(config_name, str) or not isinstance(layers, list) or not layers:
            raise BoardError("not a docker save archive: the manifest names no config or no layers", status=422)
        for name in [config_name, *layers]:
            if not isinstance(name, str) or not _safe_name(name) or normal_name(name) not in by_name:
                raise BoardError(f"not a docker save archive: {name!r} is named but not in it", status=422)
        config = _read_json(tar, by_name[normal_name(config_name)], config_name)
    labels = ((config or {}).get("config") or {}).get("Labels") or {} if isinstance(config, dict) else {}
    if not isinstance(labels, dict) or labels.get(CONTRACT_LABEL) != AGENT_CONTRACT:
        raise BoardError(
            f'the image has no contract label: build it with LABEL {CONTRACT_LABEL}="{AGENT_CONTRACT}"', status=422
        )
    return ImageArchive(
        image_id="sha256:" + PurePosixPath(config_name).name.removesuffix(".json"),
        config_name=normal_name(config_name),
        layers=[normal_name(str(layer)) for layer in layers],
        labels={str(k): str(v) for k, v in labels.items()},
    )


def _members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's members, read one by one so that a flood of them is refused before it is all read."""
    members: list[tarfile.TarInfo] = []
    try:
        while (member := tar.next()) is not None:
            members.append(member)
            if len(members) > MAX_MEMBERS:
                raise BoardError(f"refused: the archive has over {MAX_MEMBERS} members", status=422)
    except tarfile.TarError as exc:
        raise BoardError(f"not a docker save archive: a damaged tar ({exc})", status=422) from exc
    return members


def _refuse_names(tar: tarfile.TarFile, by_name: dict[str, tarfile.TarInfo], manifest: Any) -> None:
    """Refuse an archive that names its image anywhere the engine reads names from on load."""
    if isinstance(manifest, list):
        for entry in manifest:
            tags = entry.get("RepoTags") if isinstance(entry, dict) else None
            if tags:
                raise BoardError(f"refused: {MANIFEST} names the image ({_shown(tags)}); save it by id", status=422)
    if REPOSITORIES in by_name:
        repositories = _read_json(tar, by_name[REPOSITORIES], REPOSITORIES)
        if repositories:
            raise BoardError(
                f"refused: {REPOSITORIES} names the image ({_shown(repositories)}); save it by id", status=422
            )
    if OCI_INDEX in by_name:
        index = _read_json(tar, by_name[OCI_INDEX], OCI_INDEX)
        descriptors = index.get("manifests") if isinstance(index, dict) else None
        holders = [index, *descriptors] if isinstance(descriptors, list) else [index]
        for holder in holders:
            annotations = holder.get("annotations") if isinstance(holder, dict) else None
            named = (
                {k: v for k, v in annotations.items() if k in NAME_ANNOTATIONS} if isinstance(annotations, dict) else {}
            )
            if named:
                raise BoardError(f"refused: {OCI_INDEX} names the image ({_shown(named)}); save it by id", status=422)


def _shown(value: Any) -> str:
    return json.dumps(value)[:200]


def untagged_copy(source: Path, out: Path) -> Path:
    """Write the archive at ``source`` afresh to ``out``: normalised names, the manifest's tags blanked, no
    ``repositories``, and headers Python made (no pax record of the source survives to rename a member)."""
    with tarfile.open(source, mode="r:") as src, tarfile.open(out, mode="w:", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            name = normal_name(member.name)
            if name in (REPOSITORIES, "."):
                continue
            if name == MANIFEST:
                manifest = _read_json(src, member, MANIFEST)
                for entry in manifest:
                    entry["RepoTags"] = None
                data = json.dumps(manifest).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size = len(data)
                dst.addfile(info, io.BytesIO(data))
                continue
            fresh = tarfile.TarInfo(name)
            fresh.type, fresh.size, fresh.mode, fresh.mtime = member.type, member.size, member.mode, member.mtime
            fresh.linkname = normal_name(member.linkname) if member.islnk() else member.linkname
            dst.addfile(fresh, src.extractfile(member) if member.isfile() else None)
    return out


BOARD_IMAGES: Final = "ispm-board/"
"""Every board's image tags are under this repository path."""


def board_name(board_id: str) -> str:
    """``board_id`` as a Docker name component: a readable slug and 8 hex of its sha256 (two ids that slug alike
    stay apart), e.g. ``example-board-1a2b3c4d``."""
    slug = re.sub(r"[^a-z0-9]+", "-", board_id.lower()).strip("-")[:40].strip("-") or "board"
    return f"{slug}-{hashlib.sha256(board_id.encode()).hexdigest()[:8]}"


def board_tag(board_id: str, submission_id: int, archive: ImageArchive) -> str:
    """The board's tag for a submission's image, naming the board, so that boards on one engine never touch
    each other's: ``ispm-board/<board name>/submission-<id>:<12 hex of the image id>``."""
    hex_id = archive.image_id.removeprefix("sha256:")[:12]
    return f"{BOARD_IMAGES}{board_name(board_id)}/submission-{submission_id}:{hex_id}"


def load_image(path: Path, archive: ImageArchive, tag: str) -> str:
    """Load the checked archive at ``path`` untagged, tag it ``tag``, and return the engine's image id.

    Raises:
        BoardError: 422 when the engine refuses the archive, loads a different image than the one checked, or the
            load moved a tag (put back, and logged as an attack); 503 when the engine cannot be reached.
    """
    copy = untagged_copy(path, path.with_name(path.name + ".untagged"))
    try:
        return load_and_tag(copy, archive.image_id, tag, spare_new=BOARD_IMAGES)
    except TagsMoved as exc:
        _log.error("board.attack", image=archive.image_id, tag=tag, moves=[m.model_dump() for m in exc.moves])
        raise BoardError(f"refused as an attack: {exc}", status=422) from exc
    except ImageLoadRefused as exc:
        raise BoardError(str(exc), status=422) from exc
    except SandboxError as exc:
        raise BoardError(f"the board's {exc}", status=503) from exc
    finally:
        copy.unlink(missing_ok=True)


def remove_image(tag: str) -> None:
    """Drop the board's tag of a submission's image (the layers go when nothing else uses them); best effort."""
    remove_tag(tag)
