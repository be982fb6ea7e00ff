"""Secrets out of what the host keeps: provider keys and gateway tokens replaced by ``[REDACTED]``.

A call is kept as it came (:class:`~runner.call.ModelCall`) and redacted here, on the capture's thread, before it is
stored: its headers, its error and error reply, its reply, and its request (a JSON object's pieces as the store keeps
them, :func:`redact_json`; anything else whole).

A key of :data:`WHOLE_BELOW` characters or more is replaced wherever it occurs. A shorter one (``OPENAI_API_KEY=fake``
for a local server) could be part of text that is no secret, a model id above all (``fake-model-resolved-1``): it is
replaced only where it stands whole, not inside or joined to a longer run of key characters (:func:`redact_text`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

import pydantic_core

from runner.call import Body, ModelCall, Reply
from runner.transcript.model import REDACTED

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})
"""Headers whose whole value is a credential: stored as ``[REDACTED]`` whatever they hold."""
_MIN_SECRET = 8  # a shorter "key" would redact ordinary words
WHOLE_BELOW = 16
"""Keys shorter than this are replaced only where they stand whole (see the module docs)."""
# Whole: no key character (a word character or a hyphen) before or after it, and no dot or slash that joins it to
# more of them (``fake.v2``, ``openai/fake-1``); a dot that ends a sentence does not join.
_BEFORE, _AFTER = r"(?<![\w./-])", r"(?![\w-]|[./]\w)"


@functools.lru_cache(maxsize=64)
def _whole(secret: str) -> re.Pattern[str]:
    return re.compile(_BEFORE + re.escape(secret) + _AFTER)


@functools.lru_cache(maxsize=64)
def _whole_bytes(secret: bytes) -> re.Pattern[bytes]:
    return re.compile(_BEFORE.encode() + re.escape(secret) + _AFTER.encode())


def longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    """``secrets`` long enough to be one, longest first (so a key that holds another is replaced whole)."""
    return tuple(sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced: wherever it occurs, or only whole when shorter than :data:`WHOLE_BELOW`."""
    for secret in secrets:
        if secret and secret in text:
            whole = len(secret) < WHOLE_BELOW
            text = _whole(secret).sub(REDACTED, text) if whole else text.replace(secret, REDACTED)
    return text


def redact_raw(raw: bytes, secrets: Iterable[str]) -> bytes:
    """``raw`` (UTF-8 bytes) with every secret replaced as :func:`redact_text` does."""
    marker = REDACTED.encode()
    for secret in secrets:
        key = secret.encode()
        if key and key in raw:
            raw = _whole_bytes(key).sub(marker, raw) if len(secret) < WHOLE_BELOW else raw.replace(key, marker)
    return raw


def redact_json(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (parsed JSON) with every secret replaced in every string, keys included.

    Through the JSON text, not a walk: a secret the sender escaped (``\\u0073k-...``) is plain once parsed, and
    the encoder writes it plain again (UTF-8, no escapes but quotes and control characters), so the replacement
    finds it; nesting costs no recursion here. The text is pydantic-core's encoder's, several times json's speed.
    """
    raw = pydantic_core.to_json(value)
    if not any(secret.encode() in raw for secret in secrets):
        return value
    text = redact_text(raw.decode(), secrets)
    return pydantic_core.from_json(text)


def redact_headers(headers: dict[str, str], secrets: tuple[str, ...]) -> dict[str, str]:
    """``headers`` with the credential headers' values replaced whole, and every secret in the others."""
    return {
        name: REDACTED if name in SECRET_HEADERS else redact_text(value, secrets) for name, value in headers.items()
    }


def redact_body(body: Body, secrets: tuple[str, ...]) -> Body:
    """``body`` with every secret replaced in its text or JSON (base64 bytes are kept as they are)."""
    if body.encoding == "json":
        return body.model_copy(update={"content": redact_json(body.content, secrets)})
    if body.encoding == "text" and isinstance(body.content, str):
        return body.model_copy(update={"content": redact_text(body.content, secrets)})
    return body


def redact_reply(reply: Reply, secrets: tuple[str, ...]) -> Reply:
    """``reply`` with every secret the model wrote replaced (rare: rebuilt from the redacted text only then)."""
    text = reply.model_dump_json()
    if not any(secret in text for secret in secrets):
        return reply
    return Reply.model_validate_json(redact_text(text, secrets))


def redact_call(call: ModelCall, secrets: tuple[str, ...]) -> ModelCall:
    """``call`` redacted but for a JSON object request's content, which the store redacts piece by piece as it
    keeps it (a history resent whole is compared with what it kept, not redacted again)."""
    request = call.request
    if request is not None and not (request.encoding == "json" and isinstance(request.content, dict)):
        request = redact_body(request, secrets)
    return call.model_copy(
        update={
            "request_headers": redact_headers(call.request_headers, secrets),
            "request": request,
            "response": None if call.response is None else redact_reply(call.response, secrets),
            "error": None if call.error is None else redact_text(call.error, secrets),
            "error_body": None if call.error_body is None else redact_body(call.error_body, secrets),
            "cut": None
            if call.cut is None
            else call.cut.model_copy(update={"reason": redact_text(call.cut.reason, secrets)}),
        }
    )
