"""The sandbox's loopback forwarder, in this process: bytes pass unchanged both ways, and replies are not held."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.sandbox.forwarder import Forwarder


@pytest.fixture
def forwarded(tmp_path: Path) -> Iterator[tuple[Forwarder, tuple[str, int], socket.socket]]:
    """A forwarder from a loopback port to a Unix socket that a test reads and writes itself."""
    path = str(tmp_path / "gateway.sock")
    gateway = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gateway.bind(path)
    gateway.listen(1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    forwarder = Forwarder(listener, path)
    threading.Thread(target=forwarder.serve_forever, daemon=True).start()  # never returns; dies with the tests
    with gateway:
        yield forwarder, listener.getsockname(), gateway


def test_bytes_pass_unchanged_both_ways_and_the_agents_side_sends_at_once(
    forwarded: tuple[Forwarder, tuple[str, int], socket.socket],
) -> None:
    forwarder, address, gateway = forwarded
    with socket.create_connection(address, timeout=5) as agent:
        gateway.settimeout(5)
        inside, _ = gateway.accept()
        with inside:
            agent.sendall(b"POST /v1/messages HTTP/1.1\r\n\r\n")
            assert inside.recv(1024) == b"POST /v1/messages HTTP/1.1\r\n\r\n"
            inside.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
            assert agent.recv(1024) == b"HTTP/1.1 200 OK\r\n\r\n"
            # The forwarder's end of the agent's connection has Nagle off, so a reply's small writes are not held
            # back waiting for the agent's delayed ACK.
            (agents_side,) = [s for s in list(forwarder.pipes) if s.family == socket.AF_INET]
            assert agents_side.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
