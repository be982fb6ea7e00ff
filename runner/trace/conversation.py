"""A model call's request read as a conversation: messages by role, in one shape whatever the wire API.

The transcript keeps each request as the caller sent it, in its own API (chat completions, Responses, Messages);
the response is already assembled into API-neutral blocks (:class:`~runner.call.Reply`). This
module reads the four request shapes into :class:`Message` lists built from the same blocks, plus
:class:`ToolResultBlock` for what a tool returned, so the timeline, the sample page and the exports read one shape.

Agents resend their whole history on every call, so :func:`new_messages` keeps only what a call added to the
previous one (the tool results, a new user turn); a request that does not extend the previous one (a compacted or
rewritten history, a side request) is shown whole and flagged.

Everything here is the agent's or the model's text: kept as sent, escaped where shown. The functions are pure and
total: a body of an unexpected shape becomes :class:`~runner.call.OtherBlock` parts, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from runner.call import CallApi, OtherBlock, ReasoningBlock, ResponseBlock, TextBlock, ToolCallBlock

T = TypeVar("T")

Role = Literal["system", "user", "assistant", "tool"]
"""Who a message is from: the system prompt, the user (the task, a tool result in Messages' shape), the model, or a
tool (chat completions' and Responses' tool results)."""


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class ToolResultBlock(_Model):
    """What a tool returned to the model: the output of one tool call, as the agent sent it back."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str | None
    """The id of the tool call it answers."""
    text: str
    """The output as text (a list of text blocks joined by newlines; other blocks described)."""
    is_error: bool = False
    """Whether the agent marked it as an error (Messages' ``is_error``)."""


Part = Annotated[TextBlock | ToolCallBlock | ReasoningBlock | ToolResultBlock | OtherBlock, Field(discriminator="type")]
"""One block of a message."""


class Message(_Model):
    """One message of a conversation: a role and its blocks in order."""

    role: Role
    """Who it is from."""
    parts: list[Part] = Field(default_factory=list)
    """Its text, tool calls, reasoning and tool results, in order."""


class Request(_Model):
    """A request body read as a conversation."""

    system: str | None = None
    """The system prompt (Messages' ``system``, Responses' ``instructions``, chat's system or developer messages
    before the first other message); ``None`` when there is none."""
    messages: list[Message] = Field(default_factory=list)
    """The conversation sent, system messages excluded."""
    tools: list[str] = Field(default_factory=list)
    """The names of the tools offered."""


class Memo:
    """What one reader has already read, by the identity of the JSON value it came from.

    A transcript read back holds a resent message as the same object in every request that carries it, so reading
    each object once (and fingerprinting each message once) makes reading a conversation of n calls linear in its
    distinct messages rather than quadratic in its requests. The values are never changed after they are read.
    """

    def __init__(self) -> None:
        self._messages: dict[int, tuple[Any, Message]] = {}
        self._prints: dict[int, tuple[Message, str]] = {}

    def message(self, item: Any, read: Callable[[Any], Message]) -> Message:
        """``read(item)``, once per object (the object is kept, so its id is not reused)."""
        return _once(self._messages, item, read)

    def fingerprint(self, message: Message) -> str:
        """:func:`fingerprint` of ``message``, once per object."""
        return _once(self._prints, message, fingerprint)


def _once(cache: dict[int, tuple[Any, T]], obj: Any, compute: Callable[[Any], T]) -> T:
    """``compute(obj)`` from ``cache`` when this very object was seen (its id, checked by identity), else computed
    and kept with the object (so its id is not reused while cached)."""
    hit = cache.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    found = compute(obj)
    cache[id(obj)] = (obj, found)
    return found


def _text(value: Any) -> str:
    """A string field, or a short JSON rendering of whatever else was sent there."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _arguments(raw: Any) -> tuple[str, Any]:
    """A tool call's arguments as the JSON text and its parsed value (``None`` when it is not JSON)."""
    if isinstance(raw, str):
        try:
            return raw, json.loads(raw)
        except ValueError:
            return raw, None
    return json.dumps(raw, ensure_ascii=False, sort_keys=True), raw


def _tool_call(call_id: Any, name: Any, raw_arguments: Any) -> ToolCallBlock:
    arguments, parsed = _arguments(raw_arguments)
    call = None if call_id is None else str(call_id)
    return ToolCallBlock(id=call, name=_text(name), arguments=arguments, input=parsed)


def _other(kind: str, raw: Any) -> OtherBlock:
    return OtherBlock(provider_type=kind, raw=raw)


def _result_text(content: Any) -> str:
    """A tool result's content as text: a string, or text blocks joined; other blocks are named, not inlined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                pieces.append(block["text"])
            elif isinstance(block, dict):
                pieces.append(f"[{_text(block.get('type', 'block'))}]")
            else:
                pieces.append(_text(block))
        return "\n".join(pieces)
    return "" if content is None else _text(content)


# ------------------------------------------------------------------------------------------------ Messages
def _messages_block(block: Any) -> Part:
    if isinstance(block, str):
        return TextBlock(text=block)
    if not isinstance(block, dict):
        return _other("unknown", block)
    kind = block.get("type")
    if kind == "text":
        return TextBlock(text=_text(block.get("text", "")))
    if kind == "tool_use":
        return _tool_call(block.get("id"), block.get("name", ""), block.get("input", {}))
    if kind == "tool_result":
        return ToolResultBlock(
            call_id=_text(block.get("tool_use_id")) if block.get("tool_use_id") is not None else None,
            text=_result_text(block.get("content")),
            is_error=block.get("is_error") is True,
        )
    if kind == "thinking":
        return ReasoningBlock(text=_text(block.get("thinking", "")), signature=block.get("signature"))
    if kind == "redacted_thinking":
        return ReasoningBlock(text="", redacted=True)
    return _other(_text(kind), block)


def _messages_item(item: Any) -> Message:
    if not isinstance(item, dict):
        return Message(role="user", parts=[_other("unknown", item)])
    role: Role = "assistant" if item.get("role") == "assistant" else "user"
    content = item.get("content")
    blocks = content if isinstance(content, list) else [content if isinstance(content, str) else _text(content)]
    return Message(role=role, parts=[_messages_block(b) for b in blocks])


def _read_messages(body: dict[str, Any], memo: Memo) -> Request:
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(b.get("text", "") if isinstance(b, dict) else _text(b) for b in system)
    messages = [memo.message(item, _messages_item) for item in body.get("messages") or []]
    return Request(system=None if system is None else _text(system), messages=messages, tools=_tool_names(body))


# ------------------------------------------------------------------------------------------------ chat
def _chat_content(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    if isinstance(content, list):
        parts: list[Part] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(TextBlock(text=_text(block.get("text", ""))))
            else:
                kind = block.get("type", "unknown") if isinstance(block, dict) else "unknown"
                parts.append(_other(_text(kind), block))
        return parts
    return [_other("unknown", content)]


def _chat_item(item: Any) -> Message:
    """One chat message (a system message that opens the conversation is the caller's to take as the system
    prompt; one here was sent later, and is shown where it was sent)."""
    if not isinstance(item, dict):
        return Message(role="user", parts=[_other("unknown", item)])
    role = item.get("role")
    if role == "tool":
        result = ToolResultBlock(call_id=item.get("tool_call_id"), text=_result_text(item.get("content")))
        return Message(role="tool", parts=[result])
    if role == "assistant":
        parts: list[Part] = []
        reasoning = item.get("reasoning_content") or item.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            parts.append(ReasoningBlock(text=reasoning))
        parts += _chat_content(item.get("content"))
        for call in item.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            call_id = call.get("id") if isinstance(call, dict) else None
            parts.append(_tool_call(call_id, function.get("name", ""), function.get("arguments", "")))
        return Message(role="assistant", parts=parts)
    shown: Role = "system" if role in ("system", "developer") else "user"
    return Message(role=shown, parts=_chat_content(item.get("content")))


def _read_chat(body: dict[str, Any], memo: Memo) -> Request:
    system: list[str] = []
    messages: list[Message] = []
    for item in body.get("messages") or []:
        if isinstance(item, dict) and item.get("role") in ("system", "developer") and not messages:
            system.append(_result_text(item.get("content")))
        else:
            messages.append(memo.message(item, _chat_item))
    return Request(system="\n".join(system) if system else None, messages=messages, tools=_tool_names(body))


# ------------------------------------------------------------------------------------------------ Responses
def _responses_item(item: Any) -> Message:
    if not isinstance(item, dict):
        return Message(role="user", parts=[_other("unknown", item)])
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        content = item.get("content")
        parts: list[Part] = []
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, str):
                parts.append(TextBlock(text=block))
            elif isinstance(block, dict) and block.get("type") in ("input_text", "output_text", "text"):
                parts.append(TextBlock(text=_text(block.get("text", ""))))
            elif isinstance(block, dict) and block.get("type") == "refusal":
                parts.append(TextBlock(text=_text(block.get("refusal", ""))))
            else:
                kind_name = block.get("type", "unknown") if isinstance(block, dict) else "unknown"
                parts.append(_other(_text(kind_name), block))
        shown: Role = "assistant" if role == "assistant" else "system" if role in ("system", "developer") else "user"
        return Message(role=shown, parts=parts)
    if kind == "function_call":
        call = _tool_call(item.get("call_id"), item.get("name", ""), item.get("arguments", ""))
        return Message(role="assistant", parts=[call])
    if kind == "function_call_output":
        output = item.get("output")
        return Message(role="tool", parts=[ToolResultBlock(call_id=item.get("call_id"), text=_result_text(output))])
    if kind == "reasoning":
        summary = item.get("summary") or []
        text = "\n".join(s.get("text", "") for s in summary if isinstance(s, dict))
        # A summary is kept beside encrypted content (store=false): the summary shows, the encrypted part is withheld.
        withheld = bool(item.get("encrypted_content")) or not text
        return Message(role="assistant", parts=[ReasoningBlock(text=text, redacted=withheld)])
    return Message(role="user", parts=[_other(_text(kind), item)])


def _read_responses(body: dict[str, Any], memo: Memo) -> Request:
    given = body.get("input")
    items = [{"type": "message", "role": "user", "content": given}] if isinstance(given, str) else given or []
    messages: list[Message] = []
    for item in items:
        message = memo.message(item, _responses_item)
        # Responses sends an assistant turn as several items (reasoning, text, each call): one message again.
        if message.role == "assistant" and messages and messages[-1].role == "assistant":
            messages[-1] = Message(role="assistant", parts=[*messages[-1].parts, *message.parts])
        else:
            messages.append(message)
    instructions = body.get("instructions")
    return Request(
        system=None if instructions is None else _text(instructions), messages=messages, tools=_tool_names(body)
    )


# ------------------------------------------------------------------------------------------------ Gemini
def _gemini_part(part: Any) -> Part:
    if not isinstance(part, dict):
        return _other("unknown", part)
    call = part.get("functionCall", part.get("function_call"))
    if isinstance(call, dict):
        return _tool_call(call.get("id"), call.get("name", ""), call.get("args") or {})
    response = part.get("functionResponse", part.get("function_response"))
    if isinstance(response, dict):
        result = response.get("response")
        given = result if not (isinstance(result, dict) and len(result) == 1) else next(iter(result.values()))
        return ToolResultBlock(call_id=response.get("id"), text=_result_text(given))
    if isinstance(part.get("text"), str):
        return ReasoningBlock(text=part["text"]) if part.get("thought") is True else TextBlock(text=part["text"])
    return _other(_text(next(iter(part), "unknown")), part)


def _gemini_item(item: Any) -> Message:
    """One Gemini ``Content``: the model's turn, or the user's (tool results are the user's in Gemini's shape)."""
    if not isinstance(item, dict):
        return Message(role="user", parts=[_other("unknown", item)])
    parts = [_gemini_part(p) for p in item.get("parts") or []]
    role: Role = "assistant" if item.get("role") == "model" else "user"
    if role == "user" and parts and all(isinstance(p, ToolResultBlock) for p in parts):
        role = "tool"
    return Message(role=role, parts=parts)


def _read_gemini(body: dict[str, Any], memo: Memo) -> Request:
    system = body.get("systemInstruction", body.get("system_instruction"))
    if isinstance(system, dict):
        system = "\n".join(_text(p.get("text", "")) for p in system.get("parts") or [] if isinstance(p, dict))
    messages = [memo.message(item, _gemini_item) for item in body.get("contents") or []]
    names = []
    for tool in body.get("tools") or []:
        for key, declared in tool.items() if isinstance(tool, dict) else ():
            if key in ("functionDeclarations", "function_declarations") and isinstance(declared, list):
                names += [_text(d.get("name", "")) for d in declared if isinstance(d, dict)]
            else:
                names.append(_text(key))
    return Request(system=None if system is None else _text(system), messages=messages, tools=names)


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name", tool.get("type"))
            names.append(_text(name))
    return names


def read_request(api: CallApi, body: Any, memo: Memo | None = None) -> Request:
    """The conversation a request body carries, read in the shape of ``api``; ``memo`` (one per reader of a
    transcript) reads each resent message once.

    A body that is not a JSON object (text, binary, omitted) reads as an empty request; its note is the caller's
    to show.
    """
    if not isinstance(body, dict):
        return Request()
    memo = memo or Memo()
    if api == "messages" or api == "count_tokens":
        return _read_messages(body, memo)
    if api == "chat":
        return _read_chat(body, memo)
    if api == "gemini":
        return _read_gemini(body, memo)
    return _read_responses(body, memo)


def reply_message(blocks: Sequence[ResponseBlock]) -> Message:
    """An assembled response's blocks as the assistant's message."""
    return Message(role="assistant", parts=list(blocks))


def fingerprint(message: Message) -> str:
    """What makes two messages the same turn: role and content, not provider signatures or cache hints."""
    parts: list[object] = []
    for p in message.parts:
        if isinstance(p, ToolCallBlock):
            given = json.dumps(p.input, sort_keys=True) if p.input is not None else p.arguments
            parts.append(("call", p.id, p.name, given))
        elif isinstance(p, ReasoningBlock):
            parts.append(("reasoning", p.text))
        elif isinstance(p, OtherBlock):
            parts.append(("other", p.provider_type))
        else:
            parts.append(p.model_dump_json())
    return json.dumps([message.role, parts], default=str)


def new_messages(
    previous: Sequence[Message] | None, reply: Message | None, current: Sequence[Message], memo: Memo | None = None
) -> tuple[list[Message], bool]:
    """What ``current`` (a request's messages) adds to the previous request and its reply.

    Returns the added messages and whether the history was rewritten: ``current`` does not begin with
    ``previous`` (then every message of ``current`` is returned). The previous reply, resent as the next
    assistant message, is skipped when it is there: it was shown as the reply.
    """
    if previous is None:
        return list(current), False
    prints = memo.fingerprint if memo is not None else fingerprint
    if len(current) < len(previous):
        return list(current), True
    # Message by message, so a long history costs one comparison of fingerprints per message, not a list built.
    if any(a is not b and prints(a) != prints(b) for a, b in zip(previous, current, strict=False)):
        return list(current), True
    rest = list(current[len(previous) :])
    if reply is not None and rest and rest[0].role == "assistant":
        rest = rest[1:]
    return rest, False
