#!/usr/bin/python3
"""The loopback forwarder: the sandbox's only way out, from ``127.0.0.1:<port>`` to the gateway's Unix socket.

A sample container runs with ``network_mode=none``: it has a loopback interface and nothing else. The host's
gateway listens on a Unix socket in a per-sample directory that is bind-mounted (read-only) at
``/ispm/gateway``. OpenAI SDKs speak TCP, not Unix sockets, so this script listens on loopback inside the
container and pumps bytes, unchanged, between each TCP connection and a fresh connection to the socket.
The per-sample token is checked by the gateway, not here: this script holds no secret.

It runs as the container's main process (the sandbox's keeper, started before the agent, as a uid the agent
cannot signal), is copied into a per-sample read-only directory mounted at ``/ispm/bin``, and uses the
standard library only, so it runs on the bare base image. It is one thread with a selector: every thread
would count against the sample's pids limit.

    python3 -I forwarder.py --socket /ispm/gateway/gateway.sock [--host 127.0.0.1] [--port 8765]

Once listening it prints ``ispm-forwarder: ready <host>:<port>`` (the actual port, so ``--port 0`` works
for the local backend) and flushes; the host waits for that line before it starts the agent.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import socket
import sys
from dataclasses import dataclass, field

READY = "ispm-forwarder: ready"
# Per direction: stop reading from a side while this much is waiting to be written to the other.
BUFFER_LIMIT = 256 * 1024
CHUNK = 64 * 1024
MAX_CONNECTIONS = 64


@dataclass
class Pipe:
    """One forwarded connection: the agent's TCP side and the gateway's Unix side, with pending bytes."""

    client: socket.socket
    upstream: socket.socket
    to_upstream: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)
    client_eof: bool = False
    upstream_eof: bool = False

    def peer(self, sock: socket.socket) -> socket.socket:
        """The other side of ``sock``."""
        return self.upstream if sock is self.client else self.client

    def outbox(self, sock: socket.socket) -> bytearray:
        """Bytes waiting to be written to ``sock``."""
        return self.to_client if sock is self.client else self.to_upstream


class Forwarder:
    """Accepts on loopback TCP, connects each client to the Unix socket, pumps both ways until both close."""

    def __init__(self, listener: socket.socket, socket_path: str) -> None:
        """Serve connections arriving on ``listener`` (already bound and listening)."""
        self.listener = listener
        self.socket_path = socket_path
        self.selector = selectors.DefaultSelector()
        self.pipes: dict[socket.socket, Pipe] = {}
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ)

    def serve_forever(self) -> None:
        """Run the event loop; never returns."""
        while True:
            for key, _ in self.selector.select():
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self.listener:
                    self._accept()
                elif sock in self.pipes:
                    self._pump(self.pipes[sock], sock)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        if len(self.pipes) // 2 >= MAX_CONNECTIONS:
            client.close()
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # A blocking connect to a local socket is immediate; the gateway's backlog is large.
            upstream.connect(self.socket_path)
        except OSError as exc:
            print(f"ispm-forwarder: cannot reach the gateway socket: {exc}", file=sys.stderr, flush=True)
            upstream.close()
            client.close()
            return
        # Without it, Nagle holds a reply's second small write (the first event after the head) until the agent's
        # delayed ACK: ~40 ms more to every reply's first token (bench/gateway.py, "fwd" paths).
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.setblocking(False)
        upstream.setblocking(False)
        pipe = Pipe(client, upstream)
        self.pipes[client] = self.pipes[upstream] = pipe
        self.selector.register(client, selectors.EVENT_READ)
        self.selector.register(upstream, selectors.EVENT_READ)

    def _park(self, sock: socket.socket) -> None:
        # A socket with nothing to do is unregistered until its peer's state changes it again.
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(sock)

    def _watch(self, pipe: Pipe, sock: socket.socket) -> None:
        eof = pipe.client_eof if sock is pipe.client else pipe.upstream_eof
        events = 0
        if not eof and len(pipe.outbox(pipe.peer(sock))) < BUFFER_LIMIT:
            events |= selectors.EVENT_READ
        if pipe.outbox(sock):
            events |= selectors.EVENT_WRITE
        try:
            registered = self.selector.get_key(sock)
        except (KeyError, ValueError):
            registered = None
        if events and registered is None:
            self.selector.register(sock, events)
        elif events and registered is not None and registered.events != events:
            self.selector.modify(sock, events)
        elif not events and registered is not None:
            self.selector.unregister(sock)

    def _pump(self, pipe: Pipe, sock: socket.socket) -> None:
        peer = pipe.peer(sock)
        try:
            _flush(sock, pipe.outbox(sock))
            is_client = sock is pipe.client
            eof = pipe.client_eof if is_client else pipe.upstream_eof
            if not eof and len(pipe.outbox(peer)) < BUFFER_LIMIT:
                try:
                    data = sock.recv(CHUNK)
                except BlockingIOError:
                    data = None
                if data == b"":
                    if is_client:
                        pipe.client_eof = True
                    else:
                        pipe.upstream_eof = True
                elif data:
                    pipe.outbox(peer).extend(data)
                    # Written through at once: a stream event leaves in this turn of the loop, not the next.
                    _flush(peer, pipe.outbox(peer))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(pipe)
            return
        # A side that reached EOF and whose bytes are all delivered half-closes its peer, as TCP would.
        for side, side_eof in ((pipe.client, pipe.client_eof), (pipe.upstream, pipe.upstream_eof)):
            other = pipe.peer(side)
            if side_eof and not pipe.outbox(other):
                with contextlib.suppress(OSError):
                    other.shutdown(socket.SHUT_WR)
        if pipe.client_eof and pipe.upstream_eof and not pipe.to_client and not pipe.to_upstream:
            self._close(pipe)
            return
        self._watch(pipe, pipe.client)
        self._watch(pipe, pipe.upstream)

    def _close(self, pipe: Pipe) -> None:
        for sock in (pipe.client, pipe.upstream):
            self.pipes.pop(sock, None)
            self._park(sock)
            sock.close()


def _flush(sock: socket.socket, outbox: bytearray) -> None:
    """Send what ``sock`` can take now of ``outbox``; the rest waits for the selector to say it is writable."""
    if outbox:
        try:
            sent = sock.send(outbox)
        except BlockingIOError:
            return
        del outbox[:sent]


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line: the Unix socket to reach, and where to listen."""
    parser = argparse.ArgumentParser(prog="forwarder.py", description="Loopback TCP to the ISPM gateway socket.")
    parser.add_argument("--socket", required=True, help="the gateway's Unix socket")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (%(default)s)")
    parser.add_argument("--port", type=int, default=8765, help="port to listen on; 0 picks one (%(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Listen, say so on stdout, and forward until killed."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.port))
    listener.listen(128)
    host, port = listener.getsockname()[:2]
    print(f"{READY} {host}:{port}", flush=True)
    Forwarder(listener, args.socket).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
