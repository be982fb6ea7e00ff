"""Anthropic Messages: its reader and its usage.

Anthropic counts a prompt in three parts: uncached ``input_tokens``, ``cache_read_input_tokens`` and
``cache_creation_input_tokens``; :class:`~runner.call.Usage` counts the whole prompt in ``input_tokens``, as OpenAI
does, with the cache reads and writes as parts of it.
"""

from __future__ import annotations

from typing import Any

from runner.call import Usage
from runner.gateway.protocols.api import Body
from runner.gateway.protocols.reply import (
    Block,
    Reader,
    count_of,
    error_text,
    json_text,
    key_of,
    kind_of,
    list_of,
    object_of,
    text_of,
)


def read_usage(usage: dict[str, Any]) -> Usage:
    """An Anthropic ``usage`` object; zeros where it says nothing."""
    cached = count_of(usage.get("cache_read_input_tokens"))
    written = count_of(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=count_of(usage.get("input_tokens")) + cached + written,
        output_tokens=count_of(usage.get("output_tokens")),
        cached_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=count_of(object_of(usage.get("output_tokens_details")).get("thinking_tokens")),
    )


def usage_object(usage: Usage) -> Body:
    """``usage`` as an Anthropic ``usage`` object: the uncached prompt apart from the cache reads and writes."""
    body: Body = {
        "input_tokens": max(usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens, 0),
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
    }
    if usage.reasoning_tokens:
        body["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return body


class MessagesReader(Reader):
    """A Messages reply (and ``count_tokens``' answer, which holds no reply): a body's ``content``, or a stream.

    A stream is ``finished`` at ``message_stop``; its ``error`` event is an in-stream error. The usage is
    ``message_start``'s, updated by each ``message_delta``'s (cumulative totals; a field left out keeps its value).
    """

    api = "messages"

    def read_usage(self, usage: dict[str, Any]) -> Usage:
        return read_usage(usage)

    def feed(self, event: str, data: Body) -> bool:
        self.events += 1
        kind = kind_of(event, data)
        if kind == "content_block_delta":  # nearly every event: first, and the text delta fastest
            delta = data.get("delta")
            if type(delta) is dict and self.events <= self.max_events:
                index = key_of(data.get("index"))
                block = self.blocks.get(index)
                dtype = delta.get("type")
                if block is not None and dtype == "text_delta":
                    self._text(block, delta.get("text"))
                elif block is not None:
                    self._delta(block, dtype, delta)
                elif any(isinstance(delta.get(k), str) for k in ("text", "partial_json", "thinking")):
                    self._delta(self._block(index, "text"), dtype, delta)  # a delta of a block that never started
            return True
        if kind == "message_start":
            message = object_of(data.get("message"))
            self.id = text_of(message.get("id")) or None
            self._note_model(message.get("model"))
            self._usage = dict(object_of(message.get("usage"))) or None
        elif kind == "content_block_start":
            if self.events <= self.max_events:
                self._start(key_of(data.get("index")), object_of(data.get("content_block")))
        elif kind == "message_delta":
            self.stop_reason = text_of(object_of(data.get("delta")).get("stop_reason")) or self.stop_reason
            update = {k: v for k, v in object_of(data.get("usage")).items() if v is not None}
            self._usage = {**(self._usage or {}), **update} if update or self._usage is not None else None
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            self.error = error_text(data.get("error", data))
        return False

    def _start(self, index: Any, block: dict[str, Any]) -> None:
        ctype = text_of(block.get("type"))
        if ctype == "text":
            self._add(self._block(index, "text"), block.get("text"))
        elif ctype in ("tool_use", "server_tool_use"):
            found = self._block(index, "tool_call", id=block.get("id"), name=text_of(block.get("name")))
            if block.get("input"):  # the start carries {} and the deltas the JSON text; keep a non-empty one
                self._add(found, json_text(block["input"]))
        elif ctype == "thinking":
            self._add(self._block(index, "reasoning"), block.get("thinking"))
        elif ctype == "redacted_thinking":
            self._block(index, "reasoning").redacted = True
        else:
            self._block(index, "other", name=ctype, raw=block)

    def _delta(self, block: Block, dtype: Any, delta: dict[str, Any]) -> None:
        if dtype == "text_delta":
            self._add(block, delta.get("text"))
        elif dtype == "input_json_delta":
            self._add(block, delta.get("partial_json"))
        elif dtype == "thinking_delta":
            self._add(block, delta.get("thinking"))
        elif dtype == "signature_delta":
            block.signature = (block.signature or "") + text_of(delta.get("signature"))

    def read_body(self, body: Body) -> None:
        self.id = text_of(body.get("id")) or None
        self._note_model(body.get("model"))
        if isinstance(body.get("usage"), dict):
            self._usage = body["usage"]
        self.stop_reason = text_of(body.get("stop_reason")) or None
        for number, block in enumerate(list_of(body.get("content"))):
            if not isinstance(block, dict):
                continue
            ctype = text_of(block.get("type"))
            if ctype == "text":
                self._add(self._block(number, "text"), block.get("text"))
            elif ctype == "tool_use":
                found = self._block(number, "tool_call", id=block.get("id"), name=text_of(block.get("name")))
                self._add(found, json_text(block.get("input")))
            elif ctype in ("thinking", "redacted_thinking"):
                found = self._block(number, "reasoning")
                found.redacted = ctype == "redacted_thinking"
                found.signature = block.get("signature") if isinstance(block.get("signature"), str) else None
                self._add(found, block.get("thinking"))
            else:
                self._block(number, "other", name=ctype, raw=block)
