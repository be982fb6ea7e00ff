"""Images moved without a registry: ``docker save`` streams out, ``docker load`` in, ids looked up.

The cluster ships the images a run uses to its nodes this way, and the board loads a submitter's upload this way,
so that only the sandbox stage talks to the Docker engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import docker
import docker.errors

from runner.errors import SandboxError

CHUNK_BYTES = 8 * 1024 * 1024
"""Size of one piece of a ``docker save`` stream sent between hosts."""


class ImageLoadRefused(SandboxError):
    """The engine refused an archive, or loaded an image other than the one expected."""


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
