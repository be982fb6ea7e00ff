"""Token usage, read the same way from every API, and written back in each API's shape.

OpenAI counts every prompt token in ``prompt_tokens``/``input_tokens``; Anthropic splits input into uncached
``input_tokens``, ``cache_read_input_tokens`` and ``cache_creation_input_tokens``. ``TokenUsage`` follows
OpenAI: ``input_tokens`` is the sum, and ``cached_tokens`` (cache reads) is a subset of it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from runner.gateway.protocols.api import Api, bounded


class TokenUsage(BaseModel):
    """Tokens one LLM call consumed, as OpenAI counts them."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    input_tokens: int = 0
    """Every prompt token, cached ones (read and written) included, as OpenAI counts."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cached_tokens: int = 0
    """Prompt tokens served from cache (a subset of ``input_tokens``)."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning, where the provider reports them (a subset of ``output_tokens``)."""


def usage_of(api: Api, body: dict[str, Any]) -> TokenUsage:
    """The token usage of a non-streamed response body of ``api``; zeros where the body reports none."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return TokenUsage()
    if api == "chat":
        return chat_usage(usage)
    if api == "messages":
        return messages_usage(usage)
    return responses_usage(usage)


def model_of(body: dict[str, Any]) -> str | None:
    """The model id a response body says served it (its ``model`` field, in all three APIs), or None."""
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) and model else None


def chat_usage(usage: dict[str, Any]) -> TokenUsage:
    """Read a chat-completions ``usage`` object."""
    return TokenUsage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(_field(usage.get("prompt_tokens_details"), "cached_tokens")),
        reasoning_tokens=_int(_field(usage.get("completion_tokens_details"), "reasoning_tokens")),
    )


def messages_usage(usage: dict[str, Any]) -> TokenUsage:
    """Read an Anthropic ``usage`` object; input counts uncached, cache-read and cache-written tokens."""
    cached = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    return TokenUsage(
        input_tokens=_int(usage.get("input_tokens")) + cached + written,
        output_tokens=_int(usage.get("output_tokens")),
        cached_tokens=cached,
        reasoning_tokens=_int(_field(usage.get("output_tokens_details"), "thinking_tokens")),
    )


def responses_usage(usage: dict[str, Any]) -> TokenUsage:
    """Read a Responses ``usage`` object."""
    return TokenUsage(
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cached_tokens=_int(_field(usage.get("input_tokens_details"), "cached_tokens")),
        reasoning_tokens=_int(_field(usage.get("output_tokens_details"), "reasoning_tokens")),
    )


def chat_usage_body(usage: TokenUsage) -> dict[str, Any]:
    """``usage`` as a chat-completions ``usage`` object."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def messages_usage_body(usage: TokenUsage) -> dict[str, Any]:
    """``usage`` as an Anthropic ``usage`` object.

    The OpenAI-shaped counts do not say how many prompt tokens were written to the cache, so every uncached
    prompt token is reported as ``input_tokens`` and ``cache_creation_input_tokens`` is 0.
    """
    body: dict[str, Any] = {
        "input_tokens": max(usage.input_tokens - usage.cached_tokens, 0),
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_tokens,
    }
    if usage.reasoning_tokens:
        body["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return body


def responses_usage_body(usage: TokenUsage) -> dict[str, Any]:
    """``usage`` as a Responses ``usage`` object (cache writes are not known from chat usage: 0)."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


class StreamWatch:
    """Reads usage, model and outcome off a provider's stream as it passes through, without changing it.

    Feed it every parsed SSE event in order. The chat ``data: [DONE]`` line is not JSON: the caller handles it
    and ``feed`` never sees it.

    ``finished`` is True once the protocol's terminal event was seen:

    - chat: a chunk carrying a ``finish_reason`` was seen and, when ``usage_expected`` (the request set
      ``stream_options.include_usage``, as every translated request does), a chunk carrying ``usage`` was too;
      they may be the same chunk or come in either order;
    - messages: ``message_stop``;
    - responses: ``response.completed``, ``response.incomplete`` or ``response.failed``.

    ``error`` holds a bounded description of an in-stream error: Anthropic's ``error`` event, a Responses
    ``error`` event or ``response.failed``, or a chat chunk that is an ``{"error": ...}`` object (as several
    OpenAI-compatible providers send).

    Attributes:
        usage: the best usage known so far. Messages: input (with cache reads and writes) from
            ``message_start``, output from it and then from each ``message_delta`` (cumulative totals, which
            also overwrite input counts when present). Chat: the last chunk carrying ``usage``. Responses:
            the ``usage`` of the last lifecycle event that has one (the terminal events).
        returned_model: the model id the provider reported (``model`` of a chunk, of ``message_start``'s
            message, or of a lifecycle event's response).
        finished: the terminal event was seen (above). A stream cut before it leaves False.
        error: the in-stream error text, at most 500 characters, or None.
    """

    def __init__(self, api: Api, *, usage_expected: bool = True) -> None:
        self.api: Api = api
        self.usage_expected = usage_expected
        self.usage = TokenUsage()
        self.returned_model: str | None = None
        self.finished = False
        self.error: str | None = None
        self._finish_seen = False
        self._usage_seen = False
        # Anthropic reports input on message_start and cumulative totals on message_delta.
        self._anthropic: dict[str, Any] = {}

    def feed(self, event: str, data: dict[str, Any]) -> None:
        """Take one event: ``event`` is the SSE event name (``""`` or ``"message"`` when none), ``data`` its JSON."""
        if not isinstance(data, dict):
            return
        kind = event if event not in ("", "message") else str(data.get("type") or "")
        if self.api == "chat":
            self._feed_chat(data)
        elif self.api == "messages":
            self._feed_messages(kind, data)
        else:
            self._feed_responses(kind, data)

    def _feed_chat(self, data: dict[str, Any]) -> None:
        if "error" in data and "choices" not in data:
            self.error = _error_text(data["error"])
            return
        self._note_model(data.get("model"))
        if isinstance(data.get("usage"), dict):
            self.usage = chat_usage(data["usage"])
            self._usage_seen = True
        for choice in data.get("choices") or []:
            if isinstance(choice, dict) and choice.get("finish_reason"):
                self._finish_seen = True
        self.finished = self._finish_seen and (self._usage_seen or not self.usage_expected)

    def _feed_messages(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "message_start":
            message = data.get("message") or {}
            self._note_model(message.get("model"))
            self._anthropic = dict(message.get("usage") or {})
        elif kind == "message_delta":
            # Totals are cumulative; fields left out keep their message_start value.
            self._anthropic.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            self.error = _error_text(data.get("error", data))
        self.usage = messages_usage(self._anthropic)

    def _feed_responses(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "error":
            self.error = _error_text(data)
            return
        response = data.get("response")
        if not isinstance(response, dict):
            return
        self._note_model(response.get("model"))
        if isinstance(response.get("usage"), dict):
            self.usage = responses_usage(response["usage"])
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.finished = True
        if kind == "response.failed":
            self.error = _error_text(response.get("error") or "response failed")

    def _note_model(self, model: Any) -> None:
        if isinstance(model, str) and model:
            self.returned_model = model


def _error_text(error: Any) -> str:
    """``type: message`` (or ``code: message``) of an error object, bounded."""
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        # A Responses `error` event's type is just "error"; its code says more.
        label = error.get("type") if error.get("type") not in (None, "", "error") else error.get("code")
        text = f"{label}: {message}" if label and message else message or str(label or error)
    else:
        text = str(error)
    return bounded(text)


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
