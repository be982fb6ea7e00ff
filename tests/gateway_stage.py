"""A gateway before a scripted fake provider, for the gateway's test modules: the key and settings they share, a
chat request, and :func:`staged`, which runs a gateway outside any one test, for module-scoped scenes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fake_provider import FakeProvider, Scripted, point_clients_at

from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway

KEY = "sk-live-UNIQUE-MARKER-d41d8cd98f00b204"
SETTINGS = ClientSettings(read_timeout=0.5, max_attempts=2)  # short: a hung provider costs 2 × 0.5 s
CHAT = {"model": "whatever-the-agent-says", "messages": [{"role": "user", "content": "Who lacks MFA?"}]}


def post(http: httpx.Client, token: str | None, body: Any = CHAT) -> httpx.Response:
    """``body`` posted to chat completions with ``token`` as a bearer (no authorization when None)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return http.post("/v1/chat/completions", json=body, headers=headers)


@dataclass(frozen=True)
class Stage:
    """A running gateway for a module-scoped scene, with what it needs around it."""

    gateway: Gateway
    """The gateway, listening on loopback TCP."""
    http: httpx.Client
    """A client of its TCP listener."""
    fake: FakeProvider
    """The scripted provider behind it."""
    sleeps: list[float]
    """The waits between its retries."""


@contextmanager
def staged(
    candidate: str = "openai/gpt-4.1", *script: Scripted, settings: ClientSettings = SETTINGS, **gateway: Any
) -> Iterator[Stage]:
    """A gateway for ``candidate`` before a fresh fake provider answering ``script``, outside any one test (the
    provider's variables are set for the block); ``gateway`` holds extra :class:`Gateway` arguments."""
    sleeps: list[float] = []
    with pytest.MonkeyPatch.context() as patch, FakeProvider() as fake:
        point_clients_at(patch, fake, KEY, KEY)
        fake.push(*script)
        with Gateway(candidate, settings=settings, sleep=sleeps.append, **gateway) as gw:
            host, port = gw.listen_tcp()
            with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as http:
                yield Stage(gw, http, fake, sleeps)


@contextmanager
def logged() -> Iterator[list[logging.LogRecord]]:
    """The log records emitted in the block (as caplog gathers them, but for a module-scoped scene)."""
    records: list[logging.LogRecord] = []

    class Gather(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Gather()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield records
    finally:
        root.removeHandler(handler)
