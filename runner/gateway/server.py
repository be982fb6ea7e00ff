"""The host-side model gateway: three agent APIs in, the candidate model out, every token counted.

Agents reach it with a per-sample token (never a provider key) in OpenAI Chat Completions, OpenAI Responses or
Anthropic Messages, streamed or not (:mod:`runner.gateway.app`). The gateway forwards every request to the
run's candidate with the host's key, passing it through when the provider speaks the agent's API and
translating otherwise (:mod:`runner.gateway.bridges`), and books what each sample's requests cost
(:mod:`runner.gateway.ledger`). Those counts are the run record's accounting: the agent cannot fake them.

It listens on Unix sockets (bind-mounted into network-less containers, reached through a loopback forwarder
inside) and/or on loopback TCP (:mod:`runner.gateway.listeners`). A listener may be bound to one sample: then
only that sample's token is accepted there, so a token that leaked to another container is refused as foreign.
The provider hop is asynchronous httpx (:mod:`runner.gateway.upstream`). Nothing is logged per successful
request; a refused token, a cap refusal or a provider failure is.
"""

from __future__ import annotations

import functools
import gc
import ipaddress
import os
import socket
from collections.abc import Callable
from pathlib import Path

import httpx

from runner.errors import GatewayError
from runner.gateway.app import BOUND_KEY, Upstreams, build_app
from runner.gateway.ledger import Ledger
from runner.gateway.listeners import BACKLOG, EventLoopThread
from runner.gateway.model import Caps, ClientSettings, SampleUsage
from runner.gateway.providers import PROVIDERS, Endpoint, host_secrets, parse_model
from runner.gateway.upstream import Upstream
from runner.transcript.capture import Capture
from runner.transcript.storage import DEFAULT_LIMIT_BYTES, TranscriptBuilder

__all__ = ["Caps", "Gateway", "SampleUsage"]


@functools.cache  # once per process
def _freeze_what_the_process_holds() -> None:
    """Exempt every object alive now from later garbage collections.

    A full collection walks every tracked object, and the gateway shares its process (and the GIL) with the
    runner: ~200,000 objects after start-up, ~55 ms a walk on a 2-core host, during which every agent's stream
    stands still. What is alive when the first gateway starts (modules, classes, the loaded tasks) lives as long
    as the process anyway; collected first, so no garbage is frozen with it (docs/gateway.md, Speed).
    """
    gc.collect()
    gc.freeze()


class Gateway:
    """Forwards agents' model requests to one candidate model and accounts for them per sample.

    Thread-safe. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        candidate: str,
        *,
        caps: Caps | None = None,
        settings: ClientSettings | None = None,
        sleep: Callable[[float], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_body_bytes: int = 16 * 1024 * 1024,
        body_read_s: float = 60.0,
        capture: bool = True,
        transcript_limit_bytes: int = DEFAULT_LIMIT_BYTES,
    ) -> None:
        """Configure the gateway for ``candidate`` (``provider/model``), its key and URL from the host environment.

        ``sleep`` replaces the waits between provider retries and ``transport`` httpx's (tests). A request body
        larger than ``max_body_bytes``, or still arriving after ``body_read_s`` seconds, is refused. ``capture``
        keeps each sample's transcript (at most ``transcript_limit_bytes`` of distinct content; docs/trace.md).

        Raises:
            UnknownProvider, MissingCredential, BadEndpoint: as :func:`providers.client_for` does.
        """
        provider, self.model = parse_model(candidate)
        _freeze_what_the_process_holds()
        spec = PROVIDERS[provider]
        endpoint = Endpoint(spec)
        self.candidate = candidate
        self.caps = caps or Caps()
        self.max_body_bytes = max_body_bytes
        self.ledger = Ledger(self.caps, candidate)
        self._loop = EventLoopThread()

        async def make_upstream() -> Upstream:  # httpx's async pool belongs to the loop that uses it
            return Upstream(endpoint, self.model, settings or ClientSettings(), sleep=sleep, transport=transport)

        self.upstream = self._loop.run(make_upstream())
        self.capture = Capture(host_secrets((endpoint.key,)), limit_bytes=transcript_limit_bytes) if capture else None
        self._app = build_app(
            Upstreams(self.ledger, self.upstream, spec, candidate, max_body_bytes, body_read_s, self.capture)
        )

    # -- tokens and accounting -------------------------------------------------------------------------------

    def issue_token(self, sample_id: str) -> str:
        """A fresh bearer token for ``sample_id``, starting a fresh :class:`SampleUsage`.

        Raises:
            GatewayError: the sample already holds a live token (revoke it first).
        """
        token = self.ledger.issue(sample_id)
        if self.capture is not None:
            self.capture.open(sample_id)
        return token

    def revoke(self, sample_id: str, *, settle: float = 5.0) -> SampleUsage:
        """Refuse the sample's token from now on, close listeners bound to it, and return its usage.

        Requests already forwarded still finish and are counted (the provider bills them): this waits up to
        ``settle`` seconds for them. If some are still running, the returned ``in_flight`` says so and a
        later :meth:`usage` has the final figures. Idempotent. Raises ``KeyError`` for an unknown sample.
        """
        self.ledger.usage(sample_id)  # KeyError before anything changes
        self._loop.stop_bound(sample_id)
        self.ledger.revoke(sample_id, settle=settle)
        return self.ledger.usage(sample_id)

    def usage(self, sample_id: str) -> SampleUsage:
        """A copy of the sample's usage so far. Raises ``KeyError`` for an unknown sample."""
        return self.ledger.usage(sample_id)

    def transcript(self, sample_id: str) -> TranscriptBuilder | None:
        """The sample's transcript, handed over once its calls are in (call after :meth:`revoke`); ``None`` when
        the gateway captures none or never issued the sample a token. A second call returns ``None``."""
        return None if self.capture is None else self.capture.take(sample_id)

    # -- listening -------------------------------------------------------------------------------------------

    def listen_unix(self, path: str | os.PathLike[str], *, sample_id: str | None = None, mode: int = 0o666) -> Path:
        """Serve on a Unix socket at ``path`` (replacing a stale socket file) and return the path.

        ``mode`` defaults to world-writable because the container's non-root user must connect; the bearer
        token is the access control, and the sandbox keeps the socket in a per-sample directory.
        ``sample_id`` binds the listener to one sample (see the module docs); it closes when that sample is
        revoked.

        Raises:
            GatewayError: the socket cannot be bound there.
        """
        sock_path = Path(path)
        if sock_path.is_socket():
            sock_path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(sock_path))
            os.chmod(sock_path, mode)
            sock.listen(BACKLOG)
        except OSError as exc:  # path too long (108 bytes), missing directory, a non-socket file in the way
            sock.close()
            raise GatewayError(f"cannot listen on Unix socket {sock_path}: {exc}") from exc
        self._loop.serve(self._app, sock, sample_id=sample_id, bound_key=BOUND_KEY, unix_path=sock_path)
        return sock_path

    def listen_tcp(self, host: str = "127.0.0.1", port: int = 0, *, sample_id: str | None = None) -> tuple[str, int]:
        """Serve on ``host:port`` (port 0 picks a free one) and return the bound address.

        Raises:
            GatewayError: ``host`` is not a loopback address (the gateway spends the host's keys; it never
                listens where the network can reach it), or the address cannot be bound.
        """
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise GatewayError(f"the gateway listens on loopback only, not on {host!r}")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio turns Nagle off only on such sockets, and with Nagle on every small reply
        # waits ~40 ms for the agent's delayed ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(BACKLOG)
        except OSError as exc:
            sock.close()
            raise GatewayError(f"cannot listen on {host}:{port}: {exc}") from exc
        bound_host, bound_port = sock.getsockname()[:2]
        self._loop.serve(self._app, sock, sample_id=sample_id, bound_key=BOUND_KEY)
        return str(bound_host), int(bound_port)

    def close(self) -> None:
        """Stop every listener and close the provider connections."""
        self._loop.close_listeners()
        self._loop.run(self.upstream.aclose())
        self._loop.stop()
        if self.capture is not None:
            self.capture.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
