"""Chat Completions ⇄ Anthropic Messages: requests, responses and streams, as pure functions over dicts.

Chat → Messages requests:

- ``system``/``developer`` messages become the top-level ``system`` text (Messages has no system role).
- assistant ``tool_calls`` become ``tool_use`` blocks; ``tool`` messages become ``tool_result`` blocks in a
  user turn. Consecutive turns of the same role are merged, because Messages wants the tool results for one
  assistant turn together in the next user turn.

Messages → Chat requests do the reverse: ``tool_result`` blocks become ``tool`` messages placed right after the
assistant turn that called them; ``thinking`` blocks are dropped (chat has no place for them, and their
signatures only mean something to Anthropic).

Responses map ``stop_reason`` ⇄ ``finish_reason`` and usage through :class:`~runner.call.Usage`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from runner.call import Usage
from runner.gateway.protocols import chat as chat_wire
from runner.gateway.protocols import messages as messages_wire
from runner.gateway.protocols.api import Body, StreamEvent, TranslationError, listed
from runner.gateway.protocols.chat import FromChatStream, ToolCallPiece, function_tool, tool_message

#: Messages requires ``max_tokens``; chat-completions does not. Used when the agent gives none.
DEFAULT_MAX_TOKENS = 4096

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


# --- chat → messages requests ------------------------------------------------------------------------------


def chat_to_messages_request(chat: dict[str, Any], model: str) -> dict[str, Any]:
    """Translate a chat-completions request body into a Messages request body for ``model``.

    ``stream: true`` carries over (Messages streams always report usage, so ``stream_options`` is dropped).

    Raises:
        TranslationError: the request uses something Messages cannot express (``n`` > 1, malformed tool
            arguments, unknown roles or content parts, non-function tools).
    """
    if chat.get("n", 1) not in (1, None):
        raise TranslationError("n > 1 is not supported by the Anthropic Messages API")
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for i, msg in enumerate(chat.get("messages") or []):
        if not isinstance(msg, dict):
            raise TranslationError(f"messages[{i}] is not an object")
        role = msg.get("role")
        if role in ("system", "developer"):
            system += _message_mark(_system_blocks(msg.get("content"), i), msg)
            continue
        if role == "user":
            blocks = _content_blocks(msg.get("content"), i)
        elif role == "assistant":
            blocks = _content_blocks(msg.get("content"), i) + _tool_use_blocks(msg.get("tool_calls"), f"messages[{i}] ")
        elif role == "tool":
            role = "user"
            result = {
                "type": "tool_result",
                "tool_use_id": str(msg.get("tool_call_id", "")),
                "content": _text_of(msg.get("content"), i),
            }
            blocks = [_marked(result, *_marks(msg.get("content")))]
        else:
            raise TranslationError(f"messages[{i}] has unsupported role {role!r}")
        blocks = _message_mark(blocks, msg)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    # tool_result blocks must open their user turn: a user text following tool results is moved behind them.
    for turn in turns:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b.get("type") != "tool_result")

    out: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "max_tokens": chat.get("max_completion_tokens") or chat.get("max_tokens") or DEFAULT_MAX_TOKENS,
    }
    if any("cache_control" in b for b in system):
        out["system"] = system  # text blocks, keeping the caller's cache marks
    elif system:
        out["system"] = "\n\n".join(b["text"] for b in system)
    for key in ("temperature", "top_p"):
        if chat.get(key) is not None:
            out[key] = chat[key]
    stop = chat.get("stop")
    if stop:
        if not isinstance(stop, str | list):
            raise TranslationError("stop must be a string or a list of strings")
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if chat.get("tools"):
        out["tools"] = [_tool_def(t, i) for i, t in enumerate(listed(chat["tools"], "tools"))]
    choice = _tool_choice(chat.get("tool_choice"), chat.get("parallel_tool_calls"))
    if choice is not None and out.get("tools"):
        out["tool_choice"] = choice
    if chat.get("stream"):
        out["stream"] = True
    return out


def _system_blocks(content: Any, i: int) -> list[dict[str, Any]]:
    """A system message as Messages text blocks: one per part that carries a ``cache_control`` mark (kept, so a
    prompt prefix can be cached), else the message's text as one block."""
    if _marks(content):
        blocks = _content_blocks(content, i)
        if any(b["type"] != "text" for b in blocks):
            raise TranslationError(f"messages[{i}]: a system message holds text only")
        return blocks
    return [{"type": "text", "text": _text_of(content, i)}]


def _message_mark(blocks: list[dict[str, Any]], msg: dict[str, Any]) -> list[dict[str, Any]]:
    """``blocks`` with a mark on the whole message (litellm puts one there on a tool message whose content is text)
    moved onto its last block, where Messages takes it."""
    mark = msg.get("cache_control")
    return [*blocks[:-1], _marked(blocks[-1], mark)] if isinstance(mark, dict) and blocks else blocks


def _marks(content: Any) -> list[dict[str, Any]]:
    """The ``cache_control`` marks on a message's content parts (none for text content)."""
    parts = content if isinstance(content, list) else []
    return [p["cache_control"] for p in parts if isinstance(p, dict) and isinstance(p.get("cache_control"), dict)]


def _marked(block: dict[str, Any], *marks: dict[str, Any]) -> dict[str, Any]:
    """``block`` with the last of ``marks`` as its ``cache_control``: a prompt prefix the agent asked to have cached
    stays cacheable when its chat request reaches an Anthropic candidate."""
    return {**block, "cache_control": dict(marks[-1])} if marks else block


def _text_of(content: Any, i: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(b["text"] for b in _content_blocks(content, i) if b["type"] == "text")


def _content_blocks(content: Any, i: int) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise TranslationError(f"messages[{i}].content must be a string or a list of parts")
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(_marked({"type": "text", "text": str(part.get("text", ""))}, *_marks([part])))
        elif kind == "image_url":
            blocks.append(_marked(_image_block(str((part.get("image_url") or {}).get("url", ""))), *_marks([part])))
        else:
            raise TranslationError(f"messages[{i}] has unsupported content part type {kind!r}")
    return blocks


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_use_blocks(calls: Any, where: str) -> list[dict[str, Any]]:
    """A chat message's ``tool_calls`` as Messages ``tool_use`` blocks; ``where`` prefixes an error's place.

    Raises:
        TranslationError: ``tool_calls`` is not a list of objects, a call's ``function`` is not an object, or its
            arguments are not a JSON object.
    """
    if not isinstance(calls, list | None):
        raise TranslationError(f"{where}tool_calls must be a list")
    return [_tool_use_block(call, where) for call in calls or []]


def _tool_use_block(call: Any, where: str) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not isinstance(fn or {}, dict):
        raise TranslationError(f"{where}tool calls must be objects, each with a function object")
    fn = fn or {}
    return {
        "type": "tool_use",
        "id": str(call.get("id", "")),
        "name": str(fn.get("name", "")),
        "input": _arguments_object(fn.get("arguments"), f"{where}tool call {call.get('id')!r}"),
    }


def _arguments_object(raw: Any, where: str) -> dict[str, Any]:
    """Tool-call ``arguments`` (a JSON string; empty means no arguments) as the object Messages wants."""
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw or {}
    except json.JSONDecodeError as exc:
        raise TranslationError(f"{where}: arguments are not JSON") from exc
    if not isinstance(args, dict):
        raise TranslationError(f"{where}: arguments must be a JSON object")
    return args


def _tool_def(tool: Any, i: int) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise TranslationError(f"tools[{i}]: only function tools are supported")
    fn = tool.get("function") or {}
    out: dict[str, Any] = {
        "name": fn.get("name", ""),
        "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
    }
    if fn.get("description"):
        out["description"] = fn["description"]
    return out


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    if choice is None and parallel is None:
        return None
    if choice is None or choice == "auto":
        out: dict[str, Any] = {"type": "auto"}
    elif choice == "none":
        return {"type": "none"}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        out = {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    else:
        raise TranslationError(f"unsupported tool_choice {choice!r}")
    if parallel is False:
        out["disable_parallel_tool_use"] = True
    return out


# --- messages → chat requests ------------------------------------------------------------------------------


def messages_to_chat_request(req: dict[str, Any], model: str) -> dict[str, Any]:
    """Translate a Messages request body into a chat-completions request body for ``model``.

    ``max_tokens`` becomes ``max_completion_tokens``; ``stream: true`` also asks for the usage chunk.
    ``thinking`` blocks and the ``thinking``, ``top_k`` and ``metadata`` parameters are dropped: chat has no
    equivalent. ``cache_control`` marks are dropped (OpenAI-compatible providers cache on their own).

    Raises:
        TranslationError: the request uses something chat cannot express (server tools, documents, images
            inside tool results, unknown block types or roles).
    """
    out_messages: list[dict[str, Any]] = []
    system = req.get("system")
    if isinstance(system, str):
        if system:
            out_messages.append({"role": "system", "content": system})
    elif isinstance(system, list):
        parts = [_system_part(b, i) for i, b in enumerate(system)]
        if parts:
            out_messages.append({"role": "system", "content": parts})
    elif system is not None:
        raise TranslationError("system must be a string or a list of text blocks")
    for i, msg in enumerate(req.get("messages") or []):
        if not isinstance(msg, dict):
            raise TranslationError(f"messages[{i}] is not an object")
        role = msg.get("role")
        if role == "user":
            out_messages.extend(_user_turn(msg.get("content"), i))
        elif role == "assistant":
            out_messages.append(_assistant_turn(msg.get("content"), i))
        elif role == "system":  # not in the public API, but Claude Code sends it (reminders mid-conversation)
            content = msg.get("content")
            text = content if isinstance(content, str) else [_system_part(b, i) for b in _blocks(content, i)]
            out_messages.append({"role": "system", "content": text})
        else:
            raise TranslationError(f"messages[{i}] has unsupported role {role!r}")

    out: dict[str, Any] = {"model": model, "messages": out_messages}
    if req.get("max_tokens") is not None:
        out["max_completion_tokens"] = req["max_tokens"]
    if req.get("stop_sequences"):
        out["stop"] = list(listed(req["stop_sequences"], "stop_sequences"))
    for key in ("temperature", "top_p"):
        if req.get(key) is not None:
            out[key] = req[key]
    if req.get("tools"):
        out["tools"] = [_chat_tool(t, i) for i, t in enumerate(listed(req["tools"], "tools"))]
    choice = req.get("tool_choice")
    if choice is not None and out.get("tools"):  # chat rejects tool_choice without tools
        out.update(_chat_tool_choice(choice))
    if req.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


def _system_part(block: Any, i: int) -> dict[str, Any]:
    if not isinstance(block, dict) or block.get("type") != "text":
        raise TranslationError(f"system[{i}]: only text blocks are supported")
    return {"type": "text", "text": str(block.get("text", ""))}


def _blocks(content: Any, i: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise TranslationError(f"messages[{i}].content must be a string or a list of blocks")
    return content


def _user_turn(content: Any, i: int) -> list[dict[str, Any]]:
    """A user turn as chat messages: its tool results first (as ``tool`` messages), then the rest."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in _blocks(content, i):
        kind = block.get("type")
        if kind == "tool_result":
            tools.append(tool_message(block.get("tool_use_id", ""), _tool_result_text(block.get("content"), i)))
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block.get("source"), i)}})
        else:
            raise TranslationError(f"messages[{i}]: content block type {kind!r} is not supported by chat completions")
    return tools + ([{"role": "user", "content": parts}] if parts else [])


def _tool_result_text(content: Any, i: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts: list[str] = []
    for block in _blocks(content, i):
        if block.get("type") != "text":
            raise TranslationError(
                f"messages[{i}]: tool_result content of type {block.get('type')!r} is not supported by chat"
                " completions (only text)"
            )
        texts.append(str(block.get("text", "")))
    return "".join(texts)


def _image_url(source: Any, i: int) -> str:
    if isinstance(source, dict) and source.get("type") == "base64":
        return f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
    if isinstance(source, dict) and source.get("type") == "url":
        return str(source.get("url", ""))
    kind = source.get("type") if isinstance(source, dict) else None
    raise TranslationError(f"messages[{i}]: image source {kind!r} is not supported (only base64 and url)")


def _assistant_turn(content: Any, i: int) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in _blocks(content, i):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append(_chat_tool_call(block))
        elif kind in ("thinking", "redacted_thinking"):
            continue
        else:
            raise TranslationError(f"messages[{i}]: content block type {kind!r} is not supported by chat completions")
    return _assistant_message(texts, calls)


def _chat_tool_call(block: dict[str, Any]) -> dict[str, Any]:
    """A Messages ``tool_use`` block as a chat ``tool_calls`` entry."""
    return {
        "id": str(block.get("id", "")),
        "type": "function",
        "function": {"name": str(block.get("name", "")), "arguments": json.dumps(block.get("input", {}))},
    }


def _assistant_message(texts: list[str], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat assistant message: its text pieces joined (``null`` when none), and its tool calls if any."""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _chat_tool(tool: Any, i: int) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type", "custom") != "custom" or "input_schema" not in tool:
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise TranslationError(f"tools[{i}]: Anthropic server tool {kind!r} is not supported (only custom tools)")
    return function_tool(tool.get("name", ""), tool.get("description"), tool["input_schema"], tool.get("strict"))


def _chat_tool_choice(choice: Any) -> dict[str, Any]:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "auto":
        out: dict[str, Any] = {"tool_choice": "auto"}
    elif kind == "any":
        out = {"tool_choice": "required"}
    elif kind == "tool":
        out = {"tool_choice": {"type": "function", "function": {"name": str(choice.get("name", ""))}}}
    elif kind == "none":
        return {"tool_choice": "none"}
    else:
        raise TranslationError(f"unsupported tool_choice {choice!r}")
    if choice.get("disable_parallel_tool_use"):
        out["parallel_tool_calls"] = False
    return out


# --- responses ---------------------------------------------------------------------------------------------


def messages_to_chat_response(msg: dict[str, Any]) -> dict[str, Any]:
    """Translate a Messages response body into a chat-completions response body.

    Thinking blocks are dropped: chat-completions has no place for them. ``created`` is the time of
    translation (Messages carries no timestamp).
    """
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in msg.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(_chat_tool_call(block))
    return {
        "id": msg.get("id", ""),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": msg.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": _assistant_message(texts, calls),
                "finish_reason": _FINISH.get(str(msg.get("stop_reason")), "stop"),
                "logprobs": None,
            }
        ],
        "usage": chat_wire.usage_object(messages_wire.read_usage(msg.get("usage") or {})),
    }


def chat_to_messages_response(chat: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """Translate a chat-completions response body (its first choice) into a Messages response body.

    ``model`` overrides the reported model. A refusal becomes a text block with ``stop_reason: refusal``;
    reasoning text some providers add (``reasoning_content``) is dropped.

    Raises:
        TranslationError: a tool call's arguments are not a JSON object (Messages needs an object).
    """
    choices = chat.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    text = message.get("content")
    if isinstance(text, list):  # some providers return content parts
        text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
    if text:
        content.append({"type": "text", "text": text})
    if message.get("refusal"):
        content.append({"type": "text", "text": str(message["refusal"])})
    content += _tool_use_blocks(message.get("tool_calls"), "")
    stop = "refusal" if message.get("refusal") else _STOP.get(str(choice.get("finish_reason")), "end_turn")
    usage = chat.get("usage")
    return {
        "id": str(chat.get("id", "")),
        "type": "message",
        "role": "assistant",
        "model": model or str(chat.get("model", "")),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": messages_wire.usage_object(chat_wire.read_usage(usage) if isinstance(usage, dict) else Usage()),
    }


# --- streams -----------------------------------------------------------------------------------------------


class MessagesStreamToChat:
    """Turns an Anthropic Messages event stream into chat-completions chunks, one event at a time.

    ``message_start`` gives the role chunk; text and tool-input deltas give content and ``tool_calls`` chunks;
    ``message_delta`` gives the chunk with ``finish_reason``; ``message_stop`` gives the usage chunk
    (``choices: []``) when ``include_usage``. Thinking, ``ping`` and ``error`` events give no chunk: the caller
    reads in-stream errors with ``StreamWatch``.
    """

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        self._id = ""
        self._model = ""
        self._created = int(time.time())
        self._usage: dict[str, Any] = {}
        self._tool_index: dict[int, int] = {}  # content block index → chat tool_calls index
        self._tool_without_arguments: set[int] = set()  # content block indexes of calls with no arguments yet
        self._usage_sent = False

    def feed(self, event: str, data: Body) -> list[StreamEvent]:
        """The chunks one Messages event gives (often none), each as an event without a name."""
        kind = event if event not in ("", "message") else str(data.get("type") or "")
        if kind == "message_start":
            message = data.get("message") or {}
            self._id = str(message.get("id", ""))
            self._model = str(message.get("model", ""))
            self._usage = dict(message.get("usage") or {})
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "text" and block.get("text"):
                return [self._chunk({"content": block["text"]})]
            if block.get("type") == "tool_use":
                index = self._tool_index.setdefault(int(data.get("index", 0)), len(self._tool_index))
                self._tool_without_arguments.add(int(data.get("index", 0)))
                call = {
                    "index": index,
                    "id": str(block.get("id", "")),
                    "type": "function",
                    "function": {"name": str(block.get("name", "")), "arguments": ""},
                }
                return [self._chunk({"tool_calls": [call]})]
            return []
        if kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                return [self._chunk({"content": delta["text"]})]
            tool_index = self._tool_index.get(int(data.get("index", 0)))
            if delta.get("type") == "input_json_delta" and delta.get("partial_json") and tool_index is not None:
                self._tool_without_arguments.discard(int(data.get("index", 0)))
                call = {"index": tool_index, "function": {"arguments": delta["partial_json"]}}
                return [self._chunk({"tool_calls": [call]})]
            return []
        if kind == "content_block_stop" and int(data.get("index", 0)) in self._tool_without_arguments:
            # A call without input streams no JSON; chat clients parse arguments, so send "{}" as the
            # non-streamed translation does.
            self._tool_without_arguments.discard(int(data.get("index", 0)))
            call = {"index": self._tool_index[int(data.get("index", 0))], "function": {"arguments": "{}"}}
            return [self._chunk({"tool_calls": [call]})]
        if kind == "message_delta":
            self._usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            reason = (data.get("delta") or {}).get("stop_reason")
            return [self._chunk({}, finish_reason=_FINISH.get(str(reason), "stop"))]
        if kind == "message_stop":
            return self.close()
        return []

    def close(self) -> list[StreamEvent]:
        """The final usage chunk (``choices: []``) when ``include_usage`` and it was not sent yet."""
        if not self.include_usage or self._usage_sent:
            return []
        self._usage_sent = True
        name, chunk = self._chunk({})
        chunk["choices"] = []
        chunk["usage"] = chat_wire.usage_object(messages_wire.read_usage(self._usage))
        return [(name, chunk)]

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> StreamEvent:
        chunk: Body = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return ("", chunk)


class ChatStreamToMessages(FromChatStream):
    """Turns chat-completions chunks (from an upstream asked for ``include_usage``) into Messages events.

    Emits the real sequence: ``message_start``; per content block ``content_block_start``,
    ``content_block_delta`` (``text_delta`` or ``input_json_delta``) and ``content_block_stop``; then, from
    ``close()``, ``message_delta`` (stop reason and usage) and ``message_stop``. Chat reports usage only at the
    end, so ``message_start`` carries zero usage and ``message_delta`` the full counts (input included, which
    ``MessageDeltaUsage`` allows). The message id is the chat completion's id. A stream closed before any
    ``finish_reason`` ends with ``stop_reason: null``.
    """

    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model
        self._block = -1  # index of the last content block opened, -1 before the first
        self._open_kind: str | None = None  # "text", or "tool:<chat index>"
        self._tool_blocks: dict[int, int] = {}  # chat tool_calls index → content block index
        self._refused = False

    def _opening(self, chunk: Body) -> list[StreamEvent]:
        message: Body = {
            "id": str(chunk.get("id", "")),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [("message_start", {"type": "message_start", "message": message})]

    def _text(self, text: str, refusal: bool) -> list[StreamEvent]:
        self._refused |= refusal
        events = self._open("text", {"type": "text", "text": ""})
        events.append(self._delta({"type": "text_delta", "text": text}))
        return events

    def _end(self) -> list[StreamEvent]:
        """The open block's ``content_block_stop``, then ``message_delta`` and ``message_stop``."""
        events = self._stop_block()
        stop = "refusal" if self._refused else _STOP.get(self._finish or "")
        usage = messages_wire.usage_object(self._usage)
        events.append(
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def _tool_call(self, piece: ToolCallPiece) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if piece.index not in self._tool_blocks:
            block = {"type": "tool_use", "id": piece.id, "name": piece.name, "input": {}}
            events += self._open(f"tool:{piece.index}", block)
            self._tool_blocks[piece.index] = self._block
        if piece.arguments:
            # Deltas for a call whose block is already closed (interleaved parallel calls) keep their own index.
            delta = {"type": "input_json_delta", "partial_json": piece.arguments}
            events.append(self._delta(delta, self._tool_blocks[piece.index]))
        return events

    def _open(self, kind: str, block: dict[str, Any]) -> list[StreamEvent]:
        if self._open_kind == kind:
            return []
        events = self._stop_block()
        self._block += 1
        self._open_kind = kind
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": self._block, "content_block": block})
        )
        return events

    def _stop_block(self) -> list[StreamEvent]:
        if self._open_kind is None:
            return []
        self._open_kind = None
        return [("content_block_stop", {"type": "content_block_stop", "index": self._block})]

    def _delta(self, delta: dict[str, Any], index: int | None = None) -> StreamEvent:
        block = self._block if index is None else index
        return ("content_block_delta", {"type": "content_block_delta", "index": block, "delta": delta})
