"""Images without a registry: ``docker save`` streams cut into chunks on the driver, ``docker load`` on a node.

The base image is built from live apt sources, so two hosts that build at different times get different packages
under one tag: a node never builds, it loads what the driver saved and its id must equal ``run_started``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from runner.errors import SandboxError

CHUNK_BYTES = 8 * 1024 * 1024
"""Size of one piece of a ``docker save`` stream in the object store."""


def engine_image_ids(client: Any, tags: Iterable[str]) -> dict[str, str | None]:
    """The engine's image id of each tag; ``None`` for a tag it does not have."""
    import docker

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
        SandboxError: the engine refused the stream.
    """
    # The engine reports progress as JSON lines; reading them to the end waits for the load to finish.
    for line in client.api.load_image(chunks, quiet=True):
        if isinstance(line, dict) and line.get("error"):
            raise SandboxError(f"docker load failed: {line['error']}")
