"""OpenAI Responses → Chat Completions requests, and Chat Completions → Responses responses and streams.

The Responses API keeps state on OpenAI's side (``previous_response_id``, stored items) and offers hosted
tools (web search, file search, computer use…); a chat-completions provider has neither, so those raise
``TranslationError`` naming the construct. Reasoning items in the input are dropped: they only mean something
to the model that produced them.

Tools the agent runs cross as chat functions (:class:`AgentTool`): a ``custom`` tool (free-form input, maybe a
grammar, as Codex's ``apply_patch``) is a function taking one string, ``input``, its format stated in the
description; a ``namespace``'s tools are functions named ``<namespace>__<name>``; a client-run ``tool_search`` is
a function too, and the tools its output hands the model join the chat tools. The model's calls go back to the
agent as the item each tool makes: ``custom_tool_call`` (with its ``input``), ``tool_search_call``, or a
``function_call`` with its ``namespace``.

Ids of translated output are derived from the chat completion id: ``resp_<id>`` for the response,
``msg_<id>`` for its message item, ``fc_<call id>`` for a function-call item, so the streamed and non-streamed
translations of one completion agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from runner.call import Usage
from runner.gateway.protocols import chat as chat_wire
from runner.gateway.protocols import responses as responses_wire
from runner.gateway.protocols.api import Body, StreamEvent, TranslationError, listed
from runner.gateway.protocols.chat import FromChatStream, ToolCallPiece, function_tool, tool_message

_HOSTED_REQUEST_FIELDS = {
    "previous_response_id": "previous_response_id (stored conversation state)",
    "conversation": "conversation (stored conversation state)",
    "prompt": "prompt (stored prompt templates)",
}

# finish_reason → (status, incomplete_details.reason)
_STATUS: dict[str, tuple[str, str | None]] = {
    "stop": ("completed", None),
    "tool_calls": ("completed", None),
    "function_call": ("completed", None),
    "length": ("incomplete", "max_output_tokens"),
    "content_filter": ("incomplete", "content_filter"),
}


# --- tools the agent runs, as chat functions ------------------------------------------------------------------

NAMESPACE_JOIN = "__"  # <namespace>__<name>: chat function names allow letters, digits, "_" and "-" only


@dataclass(frozen=True)
class AgentTool:
    """A tool of the agent's Responses request, as the chat function that stands for it."""

    kind: Literal["function", "custom", "tool_search"]
    """What the agent calls it: its calls come back as a ``function_call``, ``custom_tool_call`` or
    ``tool_search_call`` item."""
    name: str
    """The tool's own name."""
    namespace: str | None
    """The namespace it was offered in, if any."""
    spec: dict[str, Any]
    """The Responses tool definition."""

    @property
    def chat_name(self) -> str:
        """The chat function's name."""
        return self.name if self.namespace is None else f"{self.namespace}{NAMESPACE_JOIN}{self.name}"


def agent_tools(req: dict[str, Any]) -> dict[str, AgentTool]:
    """Every tool the request offers, by chat function name: its tools, namespaces opened, and the tools that a
    client-run tool search in its input handed the model.

    Raises:
        TranslationError: a tool the translation cannot offer as a function (a provider-run tool).
    """
    tools: dict[str, AgentTool] = {}
    offered = req.get("tools")
    _collect(tools, listed(offered, "tools") if offered else [], "tools", None)
    items = req.get("input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict) and item.get("type") == "tool_search_output" and isinstance(item.get("tools"), list):
            _collect(tools, item["tools"], f"input[{i}].tools", None)
    return tools


def _collect(tools: dict[str, AgentTool], specs: list[Any], where: str, namespace: str | None) -> None:
    for i, spec in enumerate(specs):
        kind = spec.get("type") if isinstance(spec, dict) else None
        if not isinstance(spec, dict):
            raise TranslationError(f"{where}[{i}] is not an object")
        if kind == "namespace" and namespace is None and isinstance(spec.get("tools"), list):
            _collect(tools, spec["tools"], f"{where}[{i}].tools", str(spec.get("name", "")))
        elif kind in ("function", "custom") or (kind == "tool_search" and spec.get("execution") == "client"):
            name = "tool_search" if kind == "tool_search" else str(spec.get("name", ""))
            tool = AgentTool(kind, name, namespace, spec)
            tools[tool.chat_name] = tool
        else:
            raise TranslationError(f"{where}[{i}]: {kind} tools are not supported when the provider speaks chat")


def _chat_function(tool: AgentTool) -> dict[str, Any]:
    spec = tool.spec
    if tool.kind != "custom":
        return function_tool(tool.chat_name, spec.get("description"), spec.get("parameters"), spec.get("strict"))
    fmt = spec.get("format")
    fmt = fmt if isinstance(fmt, dict) else {}
    about = "The input, one string, passed to the tool as it is."
    if fmt.get("type") == "grammar":
        about += f" It must match this {fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
    description = f"{spec.get('description') or ''}\n\n{about}".strip()
    parameters = {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
        "required": ["input"],
        "additionalProperties": False,
    }
    return function_tool(tool.chat_name, description, parameters, None)


def _custom_input(arguments: str) -> str:
    """A custom tool's input out of the chat call's arguments (the raw arguments when they are not the object)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return parsed["input"] if isinstance(parsed, dict) and isinstance(parsed.get("input"), str) else arguments


def _call_item(
    tools: dict[str, AgentTool], call_id: str, chat_name: str, arguments: str, status: str
) -> dict[str, Any]:
    """The Responses output item for the model's chat call of ``chat_name``."""
    tool = tools.get(chat_name)
    if tool is None or tool.kind == "function":
        item = _function_call_item(call_id, tool.name if tool else chat_name, arguments or "{}", status)
    elif tool.kind == "custom":
        item = {
            "type": "custom_tool_call",
            "id": f"ctc_{call_id}",
            "call_id": call_id,
            "name": tool.name,
            "input": _custom_input(arguments),
            "status": status,
        }
    else:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = {}
        item = {
            "type": "tool_search_call",
            "id": f"tsc_{call_id}",
            "call_id": call_id,
            "arguments": parsed,
            "execution": "client",
            "status": status,
        }
    if tool is not None and tool.namespace is not None:
        item["namespace"] = tool.namespace
    return item


# --- requests ----------------------------------------------------------------------------------------------


def responses_to_chat_request(req: dict[str, Any], model: str) -> dict[str, Any]:
    """Translate a Responses request body into a chat-completions request body for ``model``.

    ``instructions`` becomes the first system message; ``developer`` and ``system`` input messages become
    system messages. ``max_output_tokens`` becomes ``max_completion_tokens``; ``text.format`` becomes
    ``response_format``; ``stream: true`` also asks for the usage chunk. ``reasoning``, ``store``, ``include``,
    ``metadata`` and ``truncation`` are dropped.

    Raises:
        TranslationError: the request needs stored state (``previous_response_id``, ``conversation``,
            ``prompt``, item references, file ids), offers a tool the provider would run, or has an unknown item or
            part type.
    """
    for field, what in _HOSTED_REQUEST_FIELDS.items():
        if req.get(field):
            raise TranslationError(f"{what} is not supported when the provider speaks chat completions")
    tools = agent_tools(req)
    messages: list[dict[str, Any]] = []
    instructions = req.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    elif instructions and not isinstance(instructions, str):
        raise TranslationError("instructions must be a string")
    items = req.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        for i, item in enumerate(items):
            _add_item(messages, item, i, tools)
    elif items is not None:
        raise TranslationError("input must be a string or a list of items")

    out: dict[str, Any] = {"model": model, "messages": messages}
    if req.get("max_output_tokens") is not None:
        out["max_completion_tokens"] = req["max_output_tokens"]
    for key in ("temperature", "top_p", "parallel_tool_calls"):
        if req.get(key) is not None:
            out[key] = req[key]
    if tools:
        out["tools"] = [_chat_function(tool) for tool in tools.values()]
    if req.get("tool_choice") is not None:
        out["tool_choice"] = _chat_tool_choice(req["tool_choice"])
    text = req.get("text") or {}
    if not isinstance(text, dict):
        raise TranslationError("text must be an object")
    response_format = _response_format(text.get("format"))
    if response_format is not None:
        out["response_format"] = response_format
    if req.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


def _add_item(messages: list[dict[str, Any]], item: Any, i: int, tools: dict[str, AgentTool]) -> None:
    if not isinstance(item, dict):
        raise TranslationError(f"input[{i}] is not an object")
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role in ("system", "developer"):
            messages.append({"role": "system", "content": _text(item.get("content"), i)})
        elif role == "user":
            messages.append({"role": "user", "content": _user_content(item.get("content"), i)})
        elif role == "assistant":
            messages.append({"role": "assistant", "content": _text(item.get("content"), i)})
        else:
            raise TranslationError(f"input[{i}] has unsupported role {role!r}")
    elif kind in ("function_call", "custom_tool_call", "tool_search_call"):
        _add_call(messages, item, kind)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        messages.append(tool_message(item.get("call_id", ""), _output_text(item.get("output"), i)))
    elif kind == "tool_search_output":
        found = [t for t in agent_tools({"input": [item]}).values()]
        listing = [{"name": t.chat_name, "description": t.spec.get("description")} for t in found]
        messages.append(tool_message(item.get("call_id", ""), json.dumps({"tools_now_available": listing})))
    elif kind == "reasoning":
        return
    elif kind == "item_reference":
        raise TranslationError(f"input[{i}]: item_reference (stored items) is not supported")
    else:
        raise TranslationError(f"input[{i}]: item type {kind!r} is not supported when the provider speaks chat")


def _add_call(messages: list[dict[str, Any]], item: dict[str, Any], kind: str) -> None:
    """A call the model made, as a chat tool call: custom input as ``{"input": …}``, a namespace in the name."""
    if kind == "custom_tool_call":
        name, arguments = str(item.get("name", "")), json.dumps({"input": str(item.get("input", ""))})
    elif kind == "tool_search_call":
        name, arguments = "tool_search", json.dumps(item.get("arguments") or {})
    else:
        name, arguments = str(item.get("name", "")), str(item.get("arguments", ""))
    if item.get("namespace"):
        name = f"{item['namespace']}{NAMESPACE_JOIN}{name}"
    call = {"id": str(item.get("call_id", "")), "type": "function", "function": {"name": name, "arguments": arguments}}
    # Chat wants one assistant message holding every call of a turn (and its text, when it came first).
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _text(content: Any, i: int) -> str:
    """Text of a message whose parts can only be text (system, developer and assistant messages)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in _parts(content, i):
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            texts.append(str(part.get("text", "")))
        elif kind == "refusal":
            texts.append(str(part.get("refusal", "")))
        else:
            raise TranslationError(f"input[{i}]: content part type {kind!r} is not supported in this message")
    return "".join(texts)


def _user_content(content: Any, i: int) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in _parts(content, i):
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "input_image":
            if not part.get("image_url"):
                raise TranslationError(f"input[{i}]: input_image by file_id is not supported (give image_url)")
            image: dict[str, Any] = {"url": str(part["image_url"])}
            if part.get("detail") in ("low", "high", "auto"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise TranslationError(f"input[{i}]: content part type {kind!r} is not supported by chat completions")
    return parts


def _output_text(output: Any, i: int) -> str:
    if isinstance(output, str):
        return output
    texts: list[str] = []
    for part in _parts(output, i):
        if part.get("type") != "input_text":
            raise TranslationError(
                f"input[{i}]: function_call_output part {part.get('type')!r} is not supported (only input_text)"
            )
        texts.append(str(part.get("text", "")))
    return "".join(texts)


def _parts(content: Any, i: int) -> list[dict[str, Any]]:
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        raise TranslationError(f"input[{i}].content must be a string or a list of parts")
    return content


def _chat_tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        return {"type": "function", "function": {"name": str(choice.get("name", ""))}}
    raise TranslationError(f"tool_choice {choice!r} is not supported when the provider speaks chat")


def _response_format(fmt: Any) -> dict[str, Any] | None:
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is None or kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = {k: fmt[k] for k in ("name", "description", "schema", "strict") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise TranslationError(f"text.format {kind!r} is not supported")


# --- responses ---------------------------------------------------------------------------------------------


def chat_to_responses_response(chat: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """Translate a chat-completions response body (its first choice) into a Responses ``Response`` object.

    ``request`` is the agent's Responses request: the response echoes its settings (instructions, tools,
    tool choice, limits) as the Responses API does. ``length`` and ``content_filter`` finishes give status
    ``incomplete`` with the matching ``incomplete_details``.
    """
    choices = chat.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    finish = str(choice.get("finish_reason") or "stop")
    status, reason = _STATUS.get(finish, ("completed", None))
    chat_id = str(chat.get("id", ""))
    text = message.get("content")
    if isinstance(text, list):  # some providers return content parts
        text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
    calls = [
        (str(c.get("id", "")), str((c.get("function") or {}).get("name", "")), (c.get("function") or {}))
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    output: list[dict[str, Any]] = []
    if text or message.get("refusal") or not calls:
        output.append(_message_item(chat_id, text or "", message.get("refusal"), status))
    tools = agent_tools(request)
    for call_id, name, fn in calls:
        # Some providers send "" for a call without arguments; Responses clients parse arguments as JSON.
        output.append(_call_item(tools, call_id, name, str(fn.get("arguments") or "{}"), status))
    usage = chat.get("usage")
    return _response(
        request,
        response_id=f"resp_{chat_id}",
        created_at=chat.get("created") or 0,
        model=str(chat.get("model", "")),
        status=status,
        reason=reason,
        output=output,
        usage=chat_wire.read_usage(usage) if isinstance(usage, dict) else Usage(),
    )


def _message_item(chat_id: str, text: str, refusal: Any, status: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text or not refusal:
        content.append(_text_part(text))
    if refusal:
        content.append({"type": "refusal", "refusal": str(refusal)})
    return {"type": "message", "id": f"msg_{chat_id}", "role": "assistant", "status": status, "content": content}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _function_call_item(call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def _response(
    request: dict[str, Any],
    *,
    response_id: str,
    created_at: Any,
    model: str,
    status: str,
    reason: str | None,
    output: list[dict[str, Any]],
    usage: Usage | None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "temperature": request.get("temperature"),
        "text": request.get("text") or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "usage": responses_wire.usage_object(usage) if usage is not None else None,
    }


# --- streams -----------------------------------------------------------------------------------------------


class ChatStreamToResponses(FromChatStream):
    """Turns chat-completions chunks (from an upstream asked for ``include_usage``) into Responses events.

    Emits the real sequence: ``response.created`` and ``response.in_progress``; for text
    ``response.output_item.added`` (message), ``response.content_part.added``, ``response.output_text.delta``…,
    ``response.output_text.done``, ``response.content_part.done``, ``response.output_item.done``; for each
    function call ``response.output_item.added`` (function_call), ``response.function_call_arguments.delta``…,
    ``response.function_call_arguments.done``, ``response.output_item.done``; and from ``close()`` the
    terminal ``response.completed`` (or ``response.incomplete`` for a ``length``/``content_filter`` finish)
    carrying the whole response and its usage. Every event has ``sequence_number``, counting from 0. Refusal
    text gives no event.
    """

    def __init__(self, request: dict[str, Any], model: str) -> None:
        super().__init__()
        self.request = request
        self.model = model
        self._seq = 0
        self._chat_id = ""
        self._created: Any = 0
        self._items: list[dict[str, Any]] = []  # output items so far, the last one possibly still open
        self._open: str | None = None  # "text", or "tool:<chat index>"
        self._tool_items: dict[int, int] = {}  # chat tool_calls index → output index
        self._tools = agent_tools(request)
        self._raw: dict[int, str] = {}  # output index → the chat arguments of a custom or tool-search call so far

    def _end(self) -> list[StreamEvent]:
        """Closes the open item and gives the terminal event."""
        events = self._close_item()
        status, reason = self._status()
        if not self._items:  # no text and no call: an empty message, as the non-streamed translation gives
            events += self._text("", refusal=False) + self._close_item()
        for item in self._items:
            item["status"] = status
        response = self._snapshot(status, reason, self._items, self._usage)
        name = "response.completed" if status == "completed" else "response.incomplete"
        events.append(self._event(name, {"response": response}))
        return events

    def _status(self) -> tuple[str, str | None]:
        return _STATUS.get(self._finish or "stop", ("completed", None))

    def _opening(self, chunk: Body) -> list[StreamEvent]:
        self._chat_id = str(chunk.get("id", ""))
        self._created = chunk.get("created") or 0
        return [
            self._event("response.created", {"response": self._snapshot("in_progress", None, [], None)}),
            self._event("response.in_progress", {"response": self._snapshot("in_progress", None, [], None)}),
        ]

    def _text(self, text: str, refusal: bool) -> list[StreamEvent]:
        if refusal:
            return []
        events: list[StreamEvent] = []
        if self._open != "text":
            events += self._close_item()
            suffix = "" if not any(i["type"] == "message" for i in self._items) else f"_{len(self._items)}"
            item: dict[str, Any] = {
                "type": "message",
                "id": f"msg_{self._chat_id}{suffix}",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            events += self._add_item(item)
            self._open = "text"
            events.append(self._event("response.content_part.added", {**self._where(), "part": _text_part("")}))
            item["content"].append(_text_part(""))
        if text:
            self._items[-1]["content"][0]["text"] += text
            events.append(self._event("response.output_text.delta", {**self._where(), "delta": text, "logprobs": []}))
        return events

    def _tool_call(self, piece: ToolCallPiece) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if piece.index not in self._tool_items:
            events += self._close_item()
            opened = _call_item(self._tools, piece.id, piece.name, "", "in_progress")
            if opened["type"] == "function_call":
                opened["arguments"] = ""
            else:  # its input is known once the arguments are whole: it is given when the call closes
                self._raw[len(self._items)] = ""
            events += self._add_item(opened)
            self._tool_items[piece.index] = len(self._items) - 1
            self._open = f"tool:{piece.index}"
        output_index = self._tool_items[piece.index]
        if piece.arguments and output_index in self._raw:
            self._raw[output_index] += piece.arguments
        elif piece.arguments:
            item = self._items[output_index]
            item["arguments"] += piece.arguments
            where = {"item_id": item["id"], "output_index": output_index}
            events.append(self._event("response.function_call_arguments.delta", {**where, "delta": piece.arguments}))
        return events

    def _add_item(self, item: dict[str, Any]) -> list[StreamEvent]:
        self._items.append(item)
        added = {"output_index": len(self._items) - 1, "item": _copy(item)}
        return [self._event("response.output_item.added", added)]

    def _close_item(self) -> list[StreamEvent]:
        if self._open is None:
            return []
        item = self._items[-1] if self._open == "text" else self._items[self._tool_items[int(self._open[5:])]]
        output_index = self._items.index(item)
        self._open = None
        events: list[StreamEvent] = []
        if item["type"] == "message":
            where = {"item_id": item["id"], "output_index": output_index, "content_index": 0}
            part = item["content"][0]
            events.append(self._event("response.output_text.done", {**where, "text": part["text"], "logprobs": []}))
            events.append(self._event("response.content_part.done", {**where, "part": _copy(part)}))
        elif output_index in self._raw:
            where = {"item_id": item["id"], "output_index": output_index}
            whole = _call_item(self._tools, item["call_id"], _chat_name(item), self._raw[output_index], "completed")
            item.update({k: whole[k] for k in ("input", "arguments") if k in whole})
            if item["type"] == "custom_tool_call":
                events.append(self._event("response.custom_tool_call_input.delta", {**where, "delta": item["input"]}))
                events.append(self._event("response.custom_tool_call_input.done", {**where, "input": item["input"]}))
        else:
            where = {"item_id": item["id"], "output_index": output_index}
            if not item["arguments"]:  # as in the non-streamed translation: no arguments are "{}"
                item["arguments"] = "{}"
                events.append(self._event("response.function_call_arguments.delta", {**where, "delta": "{}"}))
            events.append(
                self._event("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
            )
        done = {**_copy(item), "status": self._status()[0]}
        events.append(self._event("response.output_item.done", {"output_index": output_index, "item": done}))
        return events

    def _where(self) -> dict[str, Any]:
        item = self._items[-1]
        return {"item_id": item["id"], "output_index": len(self._items) - 1, "content_index": 0}

    def _snapshot(
        self, status: str, reason: str | None, output: list[dict[str, Any]], usage: Usage | None
    ) -> dict[str, Any]:
        return _response(
            self.request,
            response_id=f"resp_{self._chat_id}",
            created_at=self._created,
            model=self.model,
            status=status,
            reason=reason,
            output=_copy(output),
            usage=usage,
        )

    def _event(self, name: str, body: dict[str, Any]) -> StreamEvent:
        event = {"type": name, "sequence_number": self._seq, **body}
        self._seq += 1
        return (name, event)


def _chat_name(item: dict[str, Any]) -> str:
    """The chat function name of a call item (``tool_search`` for a tool search)."""
    name = "tool_search" if item["type"] == "tool_search_call" else str(item.get("name", ""))
    return f"{item['namespace']}{NAMESPACE_JOIN}{name}" if item.get("namespace") else name


def _copy(value: Any) -> Any:
    """A deep copy of JSON-shaped ``value``, so later deltas do not change events already handed out."""
    return json.loads(json.dumps(value))
