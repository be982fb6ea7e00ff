"""The upload: a byte stream written to disk under a size cap, its sha256 computed on the way."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runner.board.errors import BoardError


class Upload(BaseModel):
    """A stream received whole."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    path: Path
    """Where it was written."""
    size: int
    """Bytes received."""
    sha256: str
    """Hex sha256 of those bytes."""


async def receive(chunks: AsyncIterator[bytes], path: Path, *, cap: int) -> Upload:
    """Write ``chunks`` to ``path``; stop reading, delete the file and refuse as soon as the stream passes ``cap``.

    Raises:
        BoardError: 413, the stream is longer than ``cap``; 400, it is empty.
    """
    digest = hashlib.sha256()
    size = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("wb") as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > cap:
                    raise BoardError(f"the upload is over the board's cap of {cap} bytes", status=413)
                digest.update(chunk)
                out.write(chunk)
        if size == 0:
            raise BoardError("the upload is empty: send the `docker save` stream of the agent image", status=400)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)
    return Upload(path=path, size=size, sha256=digest.hexdigest())
