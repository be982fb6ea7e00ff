"""A provider's reply put together into one :class:`~runner.trace.model.AssembledResponse`, in any of the three APIs.

Pure functions and one small state machine, no I/O. :func:`assemble_body` reads a non-streamed reply;
:class:`StreamAssembler` takes a stream's parsed events one by one (the gateway feeds it each event it has already
parsed and relayed, a few dictionary lookups) and gives what arrived, whole or cut. Text, tool-call arguments and
reasoning are kept up to ``max_chars`` characters in all; the rest is counted in ``dropped_chars``, so a provider
streaming without end costs bounded memory.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core

from runner.gateway.protocols import tokens
from runner.trace.model import (
    AssembledResponse,
    CallApi,
    OtherBlock,
    ReasoningBlock,
    ResponseBlock,
    ResponseUsage,
    TextBlock,
    ToolCallBlock,
)

DEFAULT_MAX_CHARS = 8 * 1024 * 1024
"""Characters of one reply's text, arguments and reasoning kept, in all."""


def _usage(api: CallApi, body: dict[str, Any]) -> ResponseUsage | None:
    if not isinstance(body.get("usage"), dict):
        return None
    used = tokens.usage_of("messages" if api == "count_tokens" else api, body)
    return ResponseUsage(**used.model_dump())


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _parsed(arguments: str) -> Any:
    """The arguments parsed, or ``None``: not JSON, or nested deeper than the store encodes (the text stays)."""
    try:
        value = json.loads(arguments) if arguments else None
        pydantic_core.to_json(value)
    except (ValueError, RecursionError):
        return None
    return value


class _Block:
    """A block being assembled."""

    def __init__(self, kind: str, *, id: str | None = None, name: str = "", raw: Any = None) -> None:
        self.kind, self.id, self.name, self.raw = kind, id, name, raw
        self.parts: list[str] = []
        self.signature: str | None = None
        self.redacted = False

    def done(self) -> ResponseBlock:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text)
        if self.kind == "tool_call":
            return ToolCallBlock(id=self.id, name=self.name, arguments=text, input=_parsed(text))
        if self.kind == "reasoning":
            return ReasoningBlock(text=text, redacted=self.redacted, signature=self.signature)
        return OtherBlock(provider_type=self.name or "unknown", raw=self.raw)


class StreamAssembler:
    """Puts one stream's events together. Feed every parsed event in order, then call :meth:`result`."""

    def __init__(self, api: CallApi, *, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.api = api
        self.max_chars = max_chars
        self.kept = 0
        self.dropped = 0
        self.events = 0
        self.id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.blocks: dict[Any, _Block] = {}  # by the provider's index, in the order they began
        self.final: dict[str, Any] | None = None  # a Responses stream's final response, assembled in result()
        # Usage is read once at the end from what the events said (summed per event, it was half the cost).
        self._chat_usage: dict[str, Any] | None = None
        self._anthropic_usage: dict[str, Any] = {}

    def _add(self, block: _Block, text: Any) -> None:
        piece = _str(text)
        room = self.max_chars - self.kept
        if len(piece) > room:
            self.dropped += len(piece) - max(room, 0)
            piece = piece[: max(room, 0)]
        self.kept += len(piece)
        if piece:
            block.parts.append(piece)

    def _text(self, block: _Block, piece: Any) -> None:
        """:meth:`_add` for the one case of nearly every event, a text piece with room for it: one call, not three."""
        if type(piece) is str and len(piece) <= self.max_chars - self.kept:
            self.kept += len(piece)
            block.parts.append(piece)
        else:
            self._add(block, piece)

    def feed(self, event: str, data: dict[str, Any]) -> None:
        """Take one event: its SSE name (``""`` when none) and its parsed JSON."""
        self.events += 1
        if self.api == "chat":
            self._chat(data)
        elif self.api == "messages":
            self._messages(event or _str(data.get("type")), data)
        else:
            self._responses(event or _str(data.get("type")), data)

    def _block(self, key: Any, kind: str, **fields: Any) -> _Block:
        found = self.blocks.get(key)
        if found is None:
            found = self.blocks[key] = _Block(kind, **fields)
        return found

    def _chat(self, data: dict[str, Any]) -> None:
        choices = data.get("choices")
        if self.model is not None and type(choices) is list and len(choices) == 1 and data.get("usage") is None:
            # Nearly every chunk after the first is one text delta: taken first, and fastest. (OpenAI's chunks carry
            # ``"usage": null`` until the last when usage is asked for, as the gateway always asks.)
            choice = choices[0]
            delta = choice.get("delta") if type(choice) is dict else None
            if (
                type(delta) is dict
                and len(delta) == 1
                and "content" in delta
                and not choice.get("finish_reason")
                and choice.get("index", 0) == 0
            ):
                self._text(self.blocks.get("text") or self._block("text", "text"), delta["content"])
                return
        self.id = self.id or (data.get("id") if isinstance(data.get("id"), str) else None)
        self.model = self.model or (data.get("model") if isinstance(data.get("model"), str) else None)
        if isinstance(data.get("usage"), dict):
            self._chat_usage = data["usage"]
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = _obj(choice.get("delta"))
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                self._add(self._block("reasoning", "reasoning"), reasoning)
            if delta.get("content"):
                self._add(self._block("text", "text"), delta["content"])
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                fn = _obj(call.get("function"))
                block = self._block(("tool", call.get("index", 0)), "tool_call", id=call.get("id"))
                block.id = block.id or call.get("id")
                block.name = block.name or _str(fn.get("name"))
                self._add(block, fn.get("arguments"))
            if choice.get("finish_reason"):
                self.stop_reason = _str(choice["finish_reason"])

    def _messages(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "content_block_delta":  # nearly every event: first, and the text delta fastest
            delta = data.get("delta")
            block = self.blocks.get(data.get("index"))
            if isinstance(delta, dict) and block is not None and delta.get("type") == "text_delta":
                self._text(block, delta.get("text"))
                return
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = data["message"]
            self.id = _str(message.get("id")) or None
            self.model = _str(message.get("model")) or None
            self._anthropic_usage = dict(_obj(message.get("usage")))
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            cb = data["content_block"]
            ctype = _str(cb.get("type"))
            index = data.get("index")
            if ctype == "text":
                self._add(self._block(index, "text"), cb.get("text"))
            elif ctype in ("tool_use", "server_tool_use"):
                block = self._block(index, "tool_call", id=cb.get("id"), name=_str(cb.get("name")))
                if cb.get("input"):  # the start carries {} and the deltas the JSON text; keep a non-empty one
                    self._add(block, json.dumps(cb["input"]))
            elif ctype == "thinking":
                self._add(self._block(index, "reasoning"), cb.get("thinking"))
            elif ctype == "redacted_thinking":
                self._block(index, "reasoning").redacted = True
            else:
                self._block(index, "other", name=ctype, raw=cb)
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            delta = data["delta"]
            dtype = _str(delta.get("type"))
            block = self.blocks.get(data.get("index")) or self._block(data.get("index"), "text")
            if dtype == "text_delta":
                self._add(block, delta.get("text"))
            elif dtype == "input_json_delta":
                self._add(block, delta.get("partial_json"))
            elif dtype == "thinking_delta":
                self._add(block, delta.get("thinking"))
            elif dtype == "signature_delta":
                block.signature = (block.signature or "") + _str(delta.get("signature"))
        elif kind == "message_delta" and isinstance(data.get("delta"), dict):
            self.stop_reason = _str(data["delta"].get("stop_reason")) or self.stop_reason
            # Totals are cumulative; fields left out keep their message_start value.
            self._anthropic_usage.update({k: v for k, v in _obj(data.get("usage")).items() if v is not None})

    def _responses(self, kind: str, data: dict[str, Any]) -> None:
        if kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
            data.get("response"), dict
        ):
            self.final = data["response"]  # read whole once, at the end, not on the stream's path
            return
        if isinstance(data.get("response"), dict):
            self.id = _str(data["response"].get("id")) or self.id
            self.model = _str(data["response"].get("model")) or self.model
        index = data.get("output_index")
        item = _obj(data.get("item")) or None
        if kind == "response.output_item.added" and item is not None:
            itype = _str(item.get("type"))
            if itype == "function_call":
                self._block(index, "tool_call", id=item.get("call_id"), name=_str(item.get("name")))
            elif itype == "reasoning":
                self._block(index, "reasoning")
            elif itype == "message":
                self._block(index, "text")
            else:
                self._block(index, "other", name=itype, raw=item)
        elif kind in (
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_text.delta",
            "response.refusal.delta",
        ):
            default = "reasoning" if "reasoning" in kind else "tool_call" if "function" in kind else "text"
            self._add(self._block(index, default), data.get("delta"))

    def result(self, *, complete: bool) -> AssembledResponse:
        """What arrived, as one message; ``complete`` says whether the stream reached its final event."""
        usage = None
        if self._chat_usage is not None:
            usage = ResponseUsage(**tokens.chat_usage(self._chat_usage).model_dump())
        elif self._anthropic_usage:
            usage = ResponseUsage(**tokens.messages_usage(self._anthropic_usage).model_dump())
        if self.final is not None:
            final = assemble_body("responses", self.final, max_chars=self.max_chars)
            return final.model_copy(
                update={"complete": complete, "stream_events": self.events, "dropped_chars": self.dropped}
            )
        return AssembledResponse(
            api=self.api,
            id=self.id,
            model=self.model,
            blocks=[b.done() for b in self.blocks.values()],
            stop_reason=self.stop_reason,
            usage=usage,
            complete=complete,
            stream_events=self.events,
            dropped_chars=self.dropped,
        )


def assemble_body(api: CallApi, body: dict[str, Any], *, max_chars: int = DEFAULT_MAX_CHARS) -> AssembledResponse:
    """A non-streamed reply of ``api`` as one message."""
    sink = StreamAssembler(api, max_chars=max_chars)  # its bounded text keeping, nothing of its stream state
    blocks: list[_Block] = []
    stop: str | None = None
    if api == "chat":
        choices = body.get("choices") if isinstance(body.get("choices"), list) else []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        message = _obj(first.get("message"))
        stop = _str(first.get("finish_reason")) or None
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            blocks.append(_Block("reasoning"))
            sink._add(blocks[-1], reasoning)
        if message.get("content"):
            blocks.append(_Block("text"))
            sink._add(blocks[-1], message["content"])
        for call in message.get("tool_calls") or []:
            fn = _obj(_obj(call).get("function"))
            blocks.append(_Block("tool_call", id=call.get("id") if isinstance(call, dict) else None))
            blocks[-1].name = _str(fn.get("name"))
            sink._add(blocks[-1], fn.get("arguments"))
    elif api in ("messages", "count_tokens"):
        stop = _str(body.get("stop_reason")) or None
        for cb in body.get("content") or []:
            if not isinstance(cb, dict):
                continue
            ctype = _str(cb.get("type"))
            if ctype == "text":
                blocks.append(_Block("text"))
                sink._add(blocks[-1], cb.get("text"))
            elif ctype == "tool_use":
                blocks.append(_Block("tool_call", id=cb.get("id"), name=_str(cb.get("name"))))
                sink._add(blocks[-1], json.dumps(cb.get("input")))
            elif ctype in ("thinking", "redacted_thinking"):
                blocks.append(_Block("reasoning"))
                blocks[-1].redacted = ctype == "redacted_thinking"
                blocks[-1].signature = cb.get("signature") if isinstance(cb.get("signature"), str) else None
                sink._add(blocks[-1], cb.get("thinking"))
            else:
                blocks.append(_Block("other", name=ctype, raw=cb))
    else:
        status = _str(body.get("status"))
        details = _obj(body.get("incomplete_details"))
        stop = _str(details.get("reason")) or status or None
        for item in body.get("output") or []:
            if not isinstance(item, dict):
                continue
            itype = _str(item.get("type"))
            if itype == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict):
                        blocks.append(_Block("text"))
                        sink._add(blocks[-1], part.get("text") or part.get("refusal"))
            elif itype == "function_call":
                blocks.append(_Block("tool_call", id=item.get("call_id"), name=_str(item.get("name"))))
                sink._add(blocks[-1], item.get("arguments"))
            elif itype == "reasoning":
                blocks.append(_Block("reasoning"))
                blocks[-1].redacted = bool(item.get("encrypted_content"))
                for part in item.get("summary") or []:
                    if isinstance(part, dict):
                        sink._add(blocks[-1], part.get("text"))
            else:
                blocks.append(_Block("other", name=itype, raw=item))
    return AssembledResponse(
        api=api,
        id=_str(body.get("id")) or None,
        model=tokens.model_of(body),
        blocks=[b.done() for b in blocks],
        stop_reason=stop,
        usage=_usage(api, body),
        complete=True,
        dropped_chars=sink.dropped,
    )
