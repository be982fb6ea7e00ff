"""The only archive the engine loads for an upload: one the board writes itself from verified blobs.

:func:`canonical_chunks` streams a ``docker save`` archive in the legacy layout every engine loads (Docker 20.10
here): ``manifest.json`` naming no tag, the config as ``config.json`` and each layer, unpacked, as
``layer-<n>.tar``: regular files with fixed names in plain ustar headers, no link, no PAX header, no long name, no
``repositories``. Its bytes come from the blobs :func:`runner.sandbox.image_archive.read_image_archive` hashed, so
the image the engine makes has the id the config's bytes hash to, and every layer the digest the config names.

:func:`load_verified` loads it under the image build lock, compares the engine's whole tag list and image ids
before and after (``runner.sandbox.tags``), tags the image with the caller's tag, and returns its id.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict

from runner.errors import SandboxError
from runner.sandbox.image_archive import CHUNK_BYTES, Blob, Gunzip, VerifiedImage
from runner.sandbox.images import build_lock
from runner.sandbox.tags import LoadEffects, TagMove, engine_images, load_effects, put_back
from runner.sandbox.transfer import ImageLoadRefused

CONFIG_NAME: Final = "config.json"
LOADED_ID: Final = "Loaded image ID: "
LOADED_TAG: Final = "Loaded image: "


class TagsMoved(ImageLoadRefused):
    """A load moved or made tags, or made images, other than the one expected: they were put back or removed and
    the caller's tag was dropped.

    Attributes:
        effects: what the load did, as found.
    """

    def __init__(self, effects: LoadEffects) -> None:
        self.effects = effects
        self.moves = effects.moves
        named = ", ".join([m.tag for m in effects.moves] + effects.images)
        count = len(effects.moves) + len(effects.images)
        super().__init__(f"the load pointed {count} name(s) of the engine at itself ({named}); put back")


class Loaded(BaseModel):
    """A verified image in the engine."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    image_id: str
    """The engine's id of it: the sha256 of its config, as verified."""
    others: list[TagMove]
    """Tags someone else moved on the engine during the load (not the load's; left alone)."""


def layer_name(n: int) -> str:
    """The canonical archive's member name of layer ``n``."""
    return f"layer-{n:03d}.tar"


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % tarfile.BLOCKSIZE)


def _plain(path: Path, blob: Blob) -> Iterator[bytes]:
    """The blob's bytes unpacked, a chunk at a time (as they were hashed)."""
    gunzip = Gunzip() if blob.gzip else None
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            if gunzip is None:
                yield chunk
            else:
                yield from gunzip.feed(chunk)


def canonical_chunks(image: VerifiedImage) -> Iterator[bytes]:
    """The canonical archive of ``image``, in pieces."""
    manifest = json.dumps(
        [{"Config": CONFIG_NAME, "RepoTags": None, "Layers": [layer_name(n) for n in range(len(image.layers))]}]
    ).encode()
    yield _header("manifest.json", len(manifest)) + manifest + _padding(len(manifest))
    config = image.path(image.config).read_bytes()
    yield _header(CONFIG_NAME, len(config)) + config + _padding(len(config))
    for n, blob in enumerate(image.layers):
        yield _header(layer_name(n), blob.diff_size)
        written = 0
        for chunk in _plain(image.path(blob), blob):
            written += len(chunk)
            yield chunk
        if written != blob.diff_size:  # the blob changed on disk since it was hashed
            raise ImageLoadRefused(f"layer {n} is {written} bytes now; {blob.diff_size} were verified")
        yield _padding(blob.diff_size)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def _loaded(lines: Iterable[Any]) -> tuple[list[str], list[str]]:
    """The tags and image ids a load's output says it made."""
    tags, ids = [], []
    for line in lines:
        if isinstance(line, dict) and line.get("error"):
            raise ImageLoadRefused(f"the engine refused the archive: {line['error']}")
        text = line.get("stream", "") if isinstance(line, dict) else ""
        for said in str(text).splitlines():
            if said.startswith(LOADED_ID):
                ids.append(said.removeprefix(LOADED_ID).strip())
            elif said.startswith(LOADED_TAG):
                tags.append(said.removeprefix(LOADED_TAG).strip())
    return tags, ids


def load_verified(
    image: VerifiedImage, tag: str, *, spare_new: str | None = None, chunks: Iterable[bytes] | None = None
) -> Loaded:
    """Load ``image`` from its canonical archive (or ``chunks``, for a test standing in for a flaw in it), tag it
    ``tag``, and return its id.

    Every name the load moved or made, and every image it made other than ``image``, is put back or removed; new
    tags under ``spare_new`` that point at the image and that the engine did not report are other loads' of the
    same image, made meanwhile (``runner.sandbox.tags``).

    Raises:
        TagsMoved: the load moved or made names; they were put back, and ``tag`` is not kept.
        ImageLoadRefused: the engine refused the archive or did not load ``image``.
        SandboxError: the engine cannot be reached.
    """
    try:
        client: Any = docker.from_env()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the Docker engine is unreachable: {exc}") from exc
    try:
        with build_lock():
            before = engine_images(client)
            tags, ids = _loaded(client.api.load_image(iter(chunks or canonical_chunks(image)), quiet=True))
            if image.image_id not in ids and image.image_id not in engine_images(client).ids:
                raise ImageLoadRefused(f"the engine did not load the image {image.image_id}")
            repository, _, version = tag.rpartition(":")
            client.api.tag(image.image_id, repository, version, force=True)
            after = engine_images(client)
        effects = load_effects(
            before, after, image_id=image.image_id, reported_tags=tags, reported_ids=ids, keep=tag, spare_new=spare_new
        )
        if effects.moves or effects.images:
            put_back(client, effects)
            client.images.remove(tag, noprune=False)  # keeps the image only if something else tags it
            raise TagsMoved(effects)
        return Loaded(image_id=image.image_id, others=effects.others)
    except docker.errors.APIError as exc:
        raise ImageLoadRefused(f"the engine refused the archive: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the Docker engine failed during the load: {exc}") from exc
    finally:
        client.close()


def canonical_bytes(image: VerifiedImage) -> bytes:
    """The whole canonical archive of a small image (tests read it back)."""
    out = io.BytesIO()
    for chunk in canonical_chunks(image):
        out.write(chunk)
    return out.getvalue()
