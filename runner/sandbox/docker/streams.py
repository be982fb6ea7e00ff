"""The engine's multiplexed streams: the agent's stdout and stderr tails, and the forwarder's ready line."""

from __future__ import annotations

import socket
import threading
from typing import Any

from docker.utils.socket import frames_iter

from runner.sandbox import forwarder
from runner.sandbox.collect import TailBuffer


class LockedTail(TailBuffer):
    """A tail that a reader thread feeds while the main thread may already read its text."""

    def __init__(self, limit: int) -> None:
        """Keep the last ``limit`` bytes."""
        super().__init__(limit)
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        """Append ``chunk``, dropping what falls out of the tail."""
        with self._lock:
            super().feed(chunk)

    def text(self) -> str:
        """The tail so far, decoded."""
        with self._lock:
            return super().text()


def raw_socket(sock: Any) -> socket.socket:
    """The plain socket under the client's wrapper of an attach or exec stream."""
    raw = getattr(sock, "_sock", sock)
    assert isinstance(raw, socket.socket)
    return raw


def _frames(sock: Any) -> Any:
    # The client's 60 s read timeout would end the stream of an agent that is silent for a minute.
    raw_socket(sock).settimeout(None)
    return frames_iter(sock, tty=False)  # type: ignore[no-untyped-call]  # types-docker leaves it untyped


def _pump(frames: Any, out: TailBuffer, err: TailBuffer, ready: threading.Event | None) -> None:
    # ``ready`` (the forwarder's stream) is set once the ready line was seen, or when the stream ends.
    seen = b""
    try:
        for stream_id, chunk in frames:
            (err if stream_id == 2 else out).feed(chunk)
            if ready is not None and not ready.is_set():
                seen = (seen + chunk)[-4096:]
                if forwarder.READY.encode() in seen:
                    ready.set()
    except Exception:  # the stream breaks when the container goes away; the tails are kept
        pass
    finally:
        if ready is not None:
            ready.set()


def start_pump(
    stream: Any, out: TailBuffer, err: TailBuffer, name: str, ready: threading.Event | None = None
) -> threading.Thread:
    """Feed ``stream``'s stdout frames to ``out`` and its stderr frames to ``err`` on a daemon thread.

    With ``ready``, the event is set once the forwarder's ready line went by, or when the stream ends.
    """
    thread = threading.Thread(target=_pump, args=(_frames(stream), out, err, ready), name=name, daemon=True)
    thread.start()
    return thread
