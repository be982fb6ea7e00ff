"""The upload: a byte stream read as it arrives, under a size cap, its sha256 computed on the way, and its image
verified as it streams (``runner.sandbox.image_archive``): nothing of it is kept but the verified blobs, in a folder
of this process under ``uploads/``.

The request body is read on the event loop and handed, a piece at a time, to the archive reader in a worker thread
through a small buffer, so an upload costs a few MiB of memory whatever its size, and a hostile archive is refused
as soon as the reader sees it, without reading the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel, ConfigDict

from runner import log
from runner.board.errors import BoardError
from runner.sandbox.image_archive import ArchiveLimits, ArchiveRefused, StreamReader, VerifiedImage, read_image_archive

UPLOADS_DIR: Final = "uploads"
PIECE_BYTES: Final = 256 * 1024
"""The body is handed to the reader in pieces of at least this (a request's chunks are often 64 KiB)."""
_BUFFERED: Final = 8
"""Pieces waiting for the reader at most: the upload's memory."""

_log = log.get(__name__)


class ReceivedImage(BaseModel):
    """An upload received whole and its image verified."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    image: VerifiedImage
    """The one image, its blobs in ``image.folder``."""
    size: int
    """Bytes received."""
    sha256: str
    """Hex sha256 of those bytes."""


def upload_folder(data_dir: Path) -> Path:
    """A fresh folder for one upload's blobs, named for this host and process so that a board that starts again
    knows its own leftovers (:func:`sweep_uploads`)."""
    name = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(6).hex()}"
    return data_dir / UPLOADS_DIR / name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_uploads(data_dir: Path) -> list[str]:
    """Remove what uploads of board processes of this host that are gone left behind (a ``kill -9`` during an
    upload or a load); the names removed. Another live process's uploads, and other hosts', are left alone."""
    folder = data_dir / UPLOADS_DIR
    host = socket.gethostname()
    removed = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        owner, _, rest = path.name.rpartition("-")[0].rpartition("-")
        pid = int(rest) if rest.isdigit() else None
        if path.is_file() or (owner == host and pid is not None and (pid == os.getpid() or not _alive(pid))):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed.append(path.name)
    if removed:
        _log.info("board.uploads_swept", removed=removed)
    return removed


async def receive_image(
    chunks: AsyncIterator[bytes], folder: Path, *, cap: int, limits: ArchiveLimits
) -> ReceivedImage:
    """Read the upload ``chunks`` and verify its image into ``folder``; stop reading as soon as the stream passes
    ``cap`` or the reader refuses it. ``folder`` is removed on any failure.

    Raises:
        BoardError: 413, the stream is longer than ``cap``; 400, it is empty; 422, the archive is refused (why).
        starlette.requests.ClientDisconnect: the client went away.
    """
    send, receive = anyio.create_memory_object_stream[bytes](max_buffer_size=_BUFFERED)
    digest = hashlib.sha256()
    counted = [0]
    outcome: list[VerifiedImage | BaseException] = []

    async def read() -> None:
        try:
            outcome.append(await anyio.to_thread.run_sync(_read_archive, receive, folder, limits))
        except BaseException as exc:  # reported after the feed stops
            outcome.append(exc)
        finally:
            receive.close()  # a feed still sending learns the reader stopped

    failure: BaseException | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            try:
                with send:
                    await _feed(chunks, send, outcome, cap=cap, digest=digest, counted=counted)
            except BaseException as exc:  # the cap, or the client gone: the reader sees the stream end
                failure = exc
        if failure is not None:
            raise failure
        size = counted[0]
        if size == 0:
            raise BoardError("the upload is empty: send the `docker save` stream of the agent image", status=400)
        (result,) = outcome
        if isinstance(result, ArchiveRefused):
            raise BoardError(str(result), status=422) from result
        if isinstance(result, BaseException):
            raise result
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return ReceivedImage(image=result, size=size, sha256=digest.hexdigest())


async def _feed(
    chunks: AsyncIterator[bytes],
    send: MemoryObjectSendStream[bytes],
    outcome: list[VerifiedImage | BaseException],
    *,
    cap: int,
    digest: Any,
    counted: list[int],
) -> None:
    """Count, hash and hand on the body; after a reader that finished (the archive's end), read the rest only to
    count and hash it; after a reader that refused, stop reading."""
    piece = b""
    reading = True
    async for chunk in chunks:
        counted[0] += len(chunk)
        if counted[0] > cap:
            raise BoardError(f"the upload is over the board's cap of {cap} bytes", status=413)
        digest.update(chunk)
        if not reading:
            continue
        piece += chunk
        if len(piece) < PIECE_BYTES:
            continue
        try:
            await send.send(piece)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            reading = False
            if any(isinstance(result, BaseException) for result in outcome):
                return
        piece = b""
    if piece and reading:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await send.send(piece)


def _read_archive(receive: MemoryObjectReceiveStream[bytes], folder: Path, limits: ArchiveLimits) -> VerifiedImage:
    def next_chunk() -> bytes:
        try:
            return anyio.from_thread.run(receive.receive)
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return b""

    return read_image_archive(StreamReader(next_chunk), folder, limits)
