"""Images moved without a registry: ``docker save`` streams out, ``docker load`` in, ids looked up.

The cluster ships the images a run uses to its nodes this way, and the board loads a submitter's upload this way,
so that only the sandbox stage talks to the Docker engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from runner.errors import SandboxError
from runner.sandbox.tags import TagMove, moved_to, put_back, tag_snapshot

CHUNK_BYTES = 8 * 1024 * 1024
"""Size of one piece of a ``docker save`` stream sent between hosts."""


class ImageLoadRefused(SandboxError):
    """The engine refused an archive, or loaded an image other than the one expected."""


class TagsMoved(ImageLoadRefused):
    """A load pointed tags at the loaded image: an attack. They were put back and the image's tag dropped.

    Attributes:
        moves: the tags the load moved or made, as they were before it.
    """

    def __init__(self, moves: list[TagMove]) -> None:
        self.moves = moves
        named = ", ".join(move.tag for move in moves)
        super().__init__(f"the archive pointed {len(moves)} tag(s) of the engine at itself ({named}); put back")


def engine_image_ids(client: Any, tags: Iterable[str]) -> dict[str, str | None]:
    """The engine's image id of each tag; ``None`` for a tag it does not have."""
    found: dict[str, str | None] = {}
    for tag in tags:
        try:
            found[tag] = str(client.images.get(tag).id)
        except docker.errors.ImageNotFound:
            found[tag] = None
    return found


def save_chunks(client: Any, tag: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The ``docker save`` stream of ``tag`` (tag included), in pieces of ``chunk_bytes``."""
    stream: Iterable[bytes] = client.images.get(tag).save(chunk_size=chunk_bytes, named=tag)
    pending = b""
    for piece in stream:
        pending += piece
        while len(pending) >= chunk_bytes:
            yield pending[:chunk_bytes]
            pending = pending[chunk_bytes:]
    if pending:
        yield pending


def load_chunks(client: Any, chunks: Iterable[bytes]) -> None:
    """``docker load`` a saved stream given piece by piece, streamed to the engine as it comes.

    Raises:
        ImageLoadRefused: the engine refused the stream.
    """
    # The engine reports progress as JSON lines; reading them to the end waits for the load to finish.
    for line in client.api.load_image(chunks, quiet=True):
        if isinstance(line, dict) and line.get("error"):
            raise ImageLoadRefused(f"docker load failed: {line['error']}")


def save_stream(image: str, chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
    """The ``docker save`` stream of ``image`` from the local engine, in chunks.

    Raises:
        SandboxError: the engine is unreachable or has no such image.
    """
    try:
        client = docker.from_env()
        saved = client.images.get(image).save(chunk_size=chunk_bytes)
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot save the image {image!r}: {exc}") from exc
    try:
        yield from saved
    finally:
        client.close()


def load_and_tag(archive: Path, image_id: str, tag: str, *, spare_new: str | None = None) -> str:
    """``docker load`` the archive at ``archive``, check it holds ``image_id``, tag that ``tag``; return its id.

    Every tag the load pointed at the image, other than ``tag``, is put back where it was (``runner.sandbox.tags``);
    new tags starting with ``spare_new`` are other loads' of the same image, made meanwhile, and are left alone.

    Raises:
        TagsMoved: the load moved or made tags; they were put back, and ``tag`` is not kept.
        ImageLoadRefused: the engine refused the archive or did not load ``image_id``.
        SandboxError: the engine cannot be reached.
    """
    try:
        client = docker.from_env()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the Docker engine is unreachable: {exc}") from exc
    try:
        before = tag_snapshot(client)
        with archive.open("rb") as stream:
            client.images.load(stream)
        image = client.images.get(image_id)
        repository, _, version = tag.rpartition(":")
        image.tag(repository, tag=version)
        moves = moved_to(before, tag_snapshot(client), str(image.id), keep=tag, spare_new=spare_new)
        if moves:
            put_back(client, moves)
            client.images.remove(tag, noprune=False)  # refused: keeps the image only if something else tags it
            raise TagsMoved(moves)
        return str(image.id)
    except docker.errors.ImageNotFound as exc:
        raise ImageLoadRefused(f"the engine did not load the image {image_id} the archive names") from exc
    except docker.errors.APIError as exc:
        raise ImageLoadRefused(f"the engine refused the archive: {exc.explanation or exc}") from exc
    except docker.errors.ImageLoadError as exc:
        raise ImageLoadRefused(f"the engine could not load the archive: {exc}") from exc
    finally:
        client.close()


def remove_tag(tag: str) -> None:
    """Drop ``tag`` (the layers go when nothing else uses them); best effort."""
    try:
        client = docker.from_env()
        try:
            client.images.remove(tag, noprune=False)
        finally:
            client.close()
    except docker.errors.DockerException:
        pass
