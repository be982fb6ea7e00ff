"""Quarantine: check a ``docker save`` archive without trusting it, then load it untagged under a board tag.

:func:`inspect_archive` reads only the archive's index, ``manifest.json`` and the image config (never a layer):
every member name must be relative and stay inside the archive, the manifest must name exactly one image whose
files are present, and the config must carry the contract label ``ispm.agent.contract=ispm.agent/v1``.

:func:`load_image` then loads a copy whose manifest has no tags and with no ``repositories`` file, so a hostile
archive cannot retag the board's own images (``ispm/base``, the agents), and tags the result itself.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from runner.board.errors import BoardError
from runner.contract import AGENT_CONTRACT
from runner.errors import SandboxError

CONTRACT_LABEL: Final = "ispm.agent.contract"
MANIFEST: Final = "manifest.json"
_DROPPED: Final = ("repositories",)
"""Legacy tag files a load would apply; the manifest's ``RepoTags`` are blanked for the same reason."""
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
    tags: list[str]
    """The tags the submitter saved it with (never applied)."""


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


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
        try:
            members = tar.getmembers()
        except tarfile.TarError as exc:
            raise BoardError(f"not a docker save archive: a damaged tar ({exc})", status=422) from exc
        by_name: dict[str, tarfile.TarInfo] = {}
        for member in members:
            if not _safe_name(member.name):
                raise BoardError(f"refused: the member name {member.name!r} leaves the archive", status=422)
            if (member.issym() or member.islnk()) and not _link_inside(member):
                raise BoardError(
                    f"refused: {member.name!r} links outside the archive ({member.linkname!r})", status=422
                )
            if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                raise BoardError(f"refused: {member.name!r} is a device, fifo or other special file", status=422)
            by_name[PurePosixPath(member.name).as_posix()] = member
        if MANIFEST not in by_name:
            raise BoardError("not a docker save archive: it has no manifest.json", status=422)
        manifest = _read_json(tar, by_name[MANIFEST], MANIFEST)
        if not isinstance(manifest, list) or not all(isinstance(m, dict) for m in manifest):
            raise BoardError("not a docker save archive: manifest.json is not a list of images", status=422)
        if len(manifest) != 1:
            raise BoardError(f"the archive holds {len(manifest)} images; submit exactly one", status=422)
        (entry,) = manifest
        config_name, layers = entry.get("Config"), entry.get("Layers")
        if not isinstance(config_name, str) or not isinstance(layers, list) or not layers:
            raise BoardError("not a docker save archive: the manifest names no config or no layers", status=422)
        for name in [config_name, *layers]:
            if not isinstance(name, str) or not _safe_name(name) or name not in by_name:
                raise BoardError(f"not a docker save archive: {name!r} is named but not in it", status=422)
        config = _read_json(tar, by_name[config_name], config_name)
    labels = ((config or {}).get("config") or {}).get("Labels") or {} if isinstance(config, dict) else {}
    if not isinstance(labels, dict) or labels.get(CONTRACT_LABEL) != AGENT_CONTRACT:
        raise BoardError(
            f'the image has no contract label: build it with LABEL {CONTRACT_LABEL}="{AGENT_CONTRACT}"', status=422
        )
    tags = entry.get("RepoTags") or []
    return ImageArchive(
        image_id="sha256:" + PurePosixPath(config_name).name.removesuffix(".json"),
        config_name=config_name,
        layers=[str(layer) for layer in layers],
        labels={str(k): str(v) for k, v in labels.items()},
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
    )


def untagged_copy(source: Path, out: Path) -> Path:
    """Copy the archive at ``source`` to ``out`` with the manifest's tags blanked and legacy tag files dropped."""
    with tarfile.open(source, mode="r:") as src, tarfile.open(out, mode="w:", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            if member.name in _DROPPED:
                continue
            if member.name == MANIFEST:
                manifest = _read_json(src, member, MANIFEST)
                for entry in manifest:
                    entry["RepoTags"] = None
                data = json.dumps(manifest).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size = len(data)
                dst.addfile(info, io.BytesIO(data))
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out


def board_tag(submission_id: int, archive: ImageArchive) -> str:
    """The board's tag for a submission's image: ``ispm-board/submission-<id>:<12 hex of the image id>``."""
    return f"ispm-board/submission-{submission_id}:{archive.image_id.removeprefix('sha256:')[:12]}"


def load_image(path: Path, archive: ImageArchive, tag: str) -> str:
    """Load the checked archive at ``path`` untagged, tag it ``tag``, and return the engine's image id.

    Raises:
        BoardError: 422 when the engine refuses the archive or loads a different image than the one checked;
            503 when the engine cannot be reached.
    """
    from runner.sandbox.transfer import ImageLoadRefused, load_and_tag

    copy = untagged_copy(path, path.with_name(path.name + ".untagged"))
    try:
        return load_and_tag(copy, archive.image_id, tag)
    except ImageLoadRefused as exc:
        raise BoardError(str(exc), status=422) from exc
    except SandboxError as exc:
        raise BoardError(f"the board's {exc}", status=503) from exc
    finally:
        copy.unlink(missing_ok=True)


def remove_image(tag: str) -> None:
    """Drop the board's tag of a submission's image (the layers go when nothing else uses them); best effort."""
    from runner.sandbox.transfer import remove_tag

    remove_tag(tag)
