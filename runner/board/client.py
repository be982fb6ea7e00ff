"""``ispm submit`` and ``ispm submit status`` as plain functions: stream an image to a board, follow it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, TextIO

import httpx

from runner.board.errors import BoardError
from runner.board.states import CLOSED, SubmissionState
from runner.errors import SandboxError

TOKEN_ENV: Final = "ISPM_BOARD_TOKEN"


def _token() -> str:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise BoardError(f"{TOKEN_ENV} is not set: ask the board's admin for a token", status=401)
    return token


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = {"error": response.text[:500]}
    if response.status_code >= 400:
        raise BoardError(
            f"the board refused ({response.status_code}): {body.get('error', body)}", status=response.status_code
        )
    if not isinstance(body, dict):
        raise BoardError(f"the board answered {body!r}", status=502)
    return body


def image_stream(image: str) -> Iterator[bytes]:
    """The ``docker save`` stream of ``image``, in chunks, from the local engine.

    Raises:
        BoardError: the engine is unreachable or has no such image.
    """
    # Docker only to stream an image out: `ispm submit status` and `cancel` start without the SDK.
    from runner.sandbox.transfer import save_stream

    try:
        yield from save_stream(image)
    except SandboxError as exc:
        raise BoardError(str(exc)) from exc


def submit(
    board: str,
    image: str,
    candidate: str,
    name: str,
    *,
    links: list[str] | None = None,
    stream: Iterator[bytes] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Stream ``image`` (or ``stream``) to the board at ``board``; return the new submission (``id``, ``status_url``).

    ``on_bytes`` is called with each chunk's size (for a progress bar).

    Raises:
        BoardError: the token is missing, the image cannot be saved, or the board refused it (with its reason).
    """
    chunks = stream if stream is not None else image_stream(image)

    def counted() -> Iterator[bytes]:
        for chunk in chunks:
            if on_bytes is not None:
                on_bytes(len(chunk))
            yield chunk

    params: list[tuple[str, str | int | float | bool | None]] = [("name", name), ("candidate", candidate)]
    params += [("link", link) for link in links or []]
    try:
        response = httpx.post(
            board.rstrip("/") + "/api/v1/submissions",
            params=params,
            content=counted(),
            headers={"authorization": f"Bearer {_token()}", "content-type": "application/x-tar"},
            timeout=httpx.Timeout(600.0, connect=10.0),
        )
    except httpx.HTTPError as exc:
        raise BoardError(f"cannot reach the board at {board}: {exc}", status=502) from exc
    return _answer(response)


def submit_with_progress(
    board: str, image: str, candidate: str, name: str, *, links: list[str] | None = None, stream: TextIO | None = None
) -> dict[str, Any]:
    """:func:`submit` with a progress bar of the bytes sent on ``stream`` (stderr by default).

    Raises:
        BoardError: as :func:`submit`.
    """
    # rich only for the upload's progress bar, kept off the start-up of the other submit commands.
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    console = Console(file=stream or sys.stderr)
    columns = (TextColumn("uploading {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(image, total=None)
        return submit(board, image, candidate, name, links=links, on_bytes=lambda n: bar.advance(task, n))


def submission_status(board: str, submission_id: int) -> dict[str, Any]:
    """The submission's current state, progress and links.

    Raises:
        BoardError: the board is unreachable, or has no such submission.
    """
    try:
        response = httpx.get(f"{board.rstrip('/')}/api/v1/submissions/{submission_id}", timeout=30.0)
    except httpx.HTTPError as exc:
        raise BoardError(f"cannot reach the board at {board}: {exc}", status=502) from exc
    return _answer(response)


def cancel_submission(board: str, submission_id: int) -> dict[str, Any]:
    """Cancel a submission made with this token that is not yet being published (a running one stops).

    Raises:
        BoardError: the board refused (another token's, auditing or closed) or is unreachable.
    """
    try:
        response = httpx.delete(
            f"{board.rstrip('/')}/api/v1/submissions/{submission_id}",
            headers={"authorization": f"Bearer {_token()}"},
            timeout=30.0,
        )
    except httpx.HTTPError as exc:
        raise BoardError(f"cannot reach the board at {board}: {exc}", status=502) from exc
    return _answer(response)


def watch_submission(
    board: str, submission_id: int, *, every_s: float = 5.0, on_change: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Poll the submission until it is closed; ``on_change`` sees each new state or progress. Return the last."""
    last: tuple[Any, ...] = ()
    while True:
        status = submission_status(board, submission_id)
        now = (status["state"], status["samples_done"], status["samples_planned"])
        if now != last and on_change is not None:
            on_change(status)
        last = now
        if status["state"] in CLOSED:
            return status
        time.sleep(every_s)


def status_line(status: dict[str, Any]) -> str:
    """One line for a person: ``#3 running 12/635 samples, ETA 1h02m``, or the reason it failed."""
    line = f"#{status['id']} {status['state']}"
    if status["samples_planned"]:
        line += f" {status['samples_done']}/{status['samples_planned']} samples"
    if status.get("eta_s") is not None and status["state"] == SubmissionState.RUNNING:
        line += f", about {round(status['eta_s'])} s left"
    if status.get("reason"):
        line += f": {status['reason']}"
    return line
