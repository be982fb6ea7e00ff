"""A real HTTP server on loopback that plays an LLM provider from a script.

It speaks OpenAI Chat Completions (``POST /v1/chat/completions``), OpenAI Responses (``POST /v1/responses``),
Anthropic Messages (``POST /v1/messages``, ``POST /v1/messages/count_tokens``), Google's Gemini
(``POST …/models/{model}:generateContent``, ``…:streamGenerateContent?alt=sse``) and ``GET /v1/models``, each
streamed when the request body says ``"stream": true`` (Gemini: when its path does). Each request takes the next scripted answer: a raw
:class:`Reply`, or a protocol-neutral :class:`Turn` the fake renders in the protocol of the path, built from the
official SDKs' types. With nothing scripted it asks :attr:`FakeProvider.responder`, then answers a canned success,
so it also serves benchmarks. Every request is recorded in ``seen``; every answer's usage in ``reported``.

Use the ``fake_provider`` fixture (import it into your test module), or ``with FakeProvider() as fake:``.
Point clients at it with ``OPENAI_BASE_URL=fake.openai_base`` / ``ANTHROPIC_BASE_URL=fake.anthropic_base`` /
``GEMINI_BASE_URL=fake.gemini_base``.

Modules: ``script`` (what a test pushes and what the fake records), ``chat``, ``responses``, ``messages``,
``gemini`` (a turn in each protocol), ``wire`` (what they share), ``server`` (HTTP), ``fixtures`` (pytest glue).
"""

from .fixtures import Sleeps, fake_provider, point_clients_at
from .script import (
    ANTHROPIC_MODEL,
    GEMINI_MODEL,
    OPENAI_MODEL,
    Reply,
    Reported,
    Scripted,
    Seen,
    Stop,
    StreamError,
    TokenCount,
    ToolCall,
    Turn,
    Usage,
    anthropic_message,
    openai_completion,
    total_usage,
    usage_from_wire,
)
from .server import FakeProvider, Responder

__all__ = [
    "ANTHROPIC_MODEL",
    "GEMINI_MODEL",
    "OPENAI_MODEL",
    "FakeProvider",
    "Reply",
    "Reported",
    "Responder",
    "Scripted",
    "Seen",
    "Sleeps",
    "Stop",
    "StreamError",
    "TokenCount",
    "ToolCall",
    "Turn",
    "Usage",
    "anthropic_message",
    "fake_provider",
    "openai_completion",
    "point_clients_at",
    "total_usage",
    "usage_from_wire",
]
