"""Gemini ``generateContent`` → Chat Completions requests; Chat Completions → Gemini responses and streams.

Gemini names the model and whether to stream in the URL, not the body: the request translation takes the model
from the caller, and the stream is the caller's to ask for. Cached contents (``cachedContent``), file references
and provider-run tools (Google Search, code execution, URL context…) have no chat form: they raise
``TranslationError`` naming the construct. ``thought`` parts in the history are dropped: they only mean something
to the model that produced them; so are ``safetySettings`` and ``thinkingConfig``, which chat cannot say.

Gemini's function calls may come without ids (its API sends none; Vertex AI does): a call without one gets
``call_<content>_<part>``, and a ``functionResponse`` without one answers the earliest unanswered call of its name,
so the chat provider sees every result paired with its call. Chat's call ids go back to the agent as
``functionCall.id``, which the SDK echoes in its ``functionResponse``.

A Gemini stream sends text as it comes, and each function call whole: text deltas become one event each; tool-call
pieces are gathered, and the last event carries the calls, the ``finishReason`` and the ``usageMetadata``.
"""

from __future__ import annotations

import json
from typing import Any

from runner.gateway.protocols import chat as chat_wire
from runner.gateway.protocols import gemini as gemini_wire
from runner.gateway.protocols.api import Body, StreamEvent, TranslationError, listed
from runner.gateway.protocols.chat import FromChatStream, ToolCallPiece, function_tool, tool_message
from runner.gateway.protocols.gemini import field
from runner.gateway.protocols.reply import object_of

#: chat ``finish_reason`` → Gemini ``finishReason`` (a function call ends a Gemini turn with ``STOP``).
_FINISH = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
#: ``functionCallingConfig.mode`` → chat ``tool_choice``.
_MODES = {"AUTO": "auto", "VALIDATED": "auto", "NONE": "none", "ANY": "required", "MODE_UNSPECIFIED": "auto"}
#: OpenAPI keys of Gemini's ``Schema`` that JSON Schema has no use for.
_SCHEMA_DROPPED = ("nullable", "propertyOrdering", "property_ordering", "example")


# --- requests ----------------------------------------------------------------------------------------------


def gemini_to_chat_request(req: Body, model: str) -> Body:
    """A Gemini ``generateContent`` body as a chat-completions request body for ``model``.

    ``systemInstruction`` becomes the system message; ``model`` contents become assistant messages (text and
    ``tool_calls``), ``user`` contents user messages, their ``functionResponse`` parts tool messages (first, so they
    follow the calls they answer). ``generationConfig`` gives ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
    ``seed``, the penalties and ``response_format``; ``toolConfig`` gives ``tool_choice``.

    Raises:
        TranslationError: cached content, a part or tool chat cannot express, or more than one candidate.
    """
    if field(req, "cachedContent"):
        raise TranslationError("cachedContent (stored context) is not supported when the provider speaks chat")
    messages: list[Body] = []
    system = field(req, "systemInstruction")
    if system is not None:
        text = _system_text(system)
        if text:
            messages.append({"role": "system", "content": text})
    calls = _CallIds()
    for i, content in enumerate(listed(req.get("contents"), "contents")):
        if not isinstance(content, dict):
            raise TranslationError(f"contents[{i}] is not an object")
        parts = listed(content.get("parts") or [], f"contents[{i}].parts")
        if content.get("role") == "model":
            messages.append(_assistant(parts, i, calls))
        else:
            messages += _user(parts, i, calls)
    out: Body = {"model": model, "messages": messages}
    tools = [t for i, tool in enumerate(listed(req.get("tools") or [], "tools")) for t in _chat_tools(tool, i)]
    if tools:
        out["tools"] = tools
    choice = _tool_choice(object_of_field(object_of_field(req, "toolConfig"), "functionCallingConfig"))
    if choice is not None:
        out["tool_choice"] = choice
    out.update(_generation(object_of_field(req, "generationConfig")))
    return out


def object_of_field(body: Any, name: str) -> Body:
    """``body``'s field ``name`` (camelCase or snake_case) when it is an object, else ``{}``."""
    value = field(body, name) if isinstance(body, dict) else None
    return value if isinstance(value, dict) else {}


class _CallIds:
    """The ids of the history's function calls, so each response is paired with its call."""

    def __init__(self) -> None:
        self._open: list[tuple[str, str]] = []  # (name, id) of calls not yet answered, in order

    def called(self, call: Body, i: int, j: int) -> str:
        """The id of the call at ``contents[i].parts[j]``: its own, or one made from where it is."""
        given = call.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{i}_{j}"
        self._open.append((str(call.get("name", "")), call_id))
        return call_id

    def answered(self, response: Body, i: int) -> str:
        """The id of the call a ``functionResponse`` answers: its own, or the earliest open call of its name."""
        given, name = response.get("id"), str(response.get("name", ""))
        if isinstance(given, str) and given:
            self._open = [(n, c) for n, c in self._open if c != given]
            return given
        for number, (open_name, call_id) in enumerate(self._open):
            if open_name == name:
                del self._open[number]
                return call_id
        raise TranslationError(f"contents[{i}]: a functionResponse for {name!r} answers no earlier functionCall")


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return str(system)
    if not isinstance(system, dict):
        raise TranslationError("systemInstruction must be a Content object")
    texts = []
    for j, part in enumerate(listed(system.get("parts") or [], "systemInstruction.parts")):
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            raise TranslationError(f"systemInstruction.parts[{j}]: only text parts are supported")
        texts.append(part["text"])
    return "\n".join(texts)


def _kind(part: Any) -> str:
    """What a part holds: the name of its data field (``text``, ``functionCall``, ``inlineData``…)."""
    if not isinstance(part, dict):
        return "non-object"
    for key in part:
        if key not in ("thought", "thoughtSignature", "thought_signature", "partMetadata", "videoMetadata"):
            return str(key)
    return "empty"


def _assistant(parts: list[Any], i: int, calls: _CallIds) -> Body:
    texts: list[str] = []
    tool_calls: list[Body] = []
    for j, part in enumerate(parts):
        kind = _kind(part)
        if part.get("thought") is True if isinstance(part, dict) else False:
            continue
        if kind == "text":
            texts.append(str(part["text"]))
        elif kind in ("functionCall", "function_call"):
            call = field(part, "functionCall")
            if not isinstance(call, dict):
                raise TranslationError(f"contents[{i}].parts[{j}].functionCall must be an object")
            arguments = json.dumps(call.get("args") if call.get("args") is not None else {})
            function = {"name": str(call.get("name", "")), "arguments": arguments}
            tool_calls.append({"id": calls.called(call, i, j), "type": "function", "function": function})
        else:
            raise TranslationError(f"contents[{i}].parts[{j}]: {kind} parts are not supported by chat completions")
    message: Body = {"role": "assistant", "content": "".join(texts) or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _user(parts: list[Any], i: int, calls: _CallIds) -> list[Body]:
    results: list[Body] = []
    content: list[Body] = []
    for j, part in enumerate(parts):
        kind = _kind(part)
        if kind == "text":
            content.append({"type": "text", "text": str(part["text"])})
        elif kind in ("functionResponse", "function_response"):
            response = field(part, "functionResponse")
            if not isinstance(response, dict):
                raise TranslationError(f"contents[{i}].parts[{j}].functionResponse must be an object")
            results.append(tool_message(calls.answered(response, i), _result_text(response.get("response"))))
        elif kind in ("inlineData", "inline_data"):
            blob = field(part, "inlineData")
            mime = str(field(blob, "mimeType") or "") if isinstance(blob, dict) else ""
            if not mime.startswith("image/"):
                raise TranslationError(f"contents[{i}].parts[{j}]: inlineData of {mime or 'no'} type is not supported")
            url = f"data:{mime};base64,{blob.get('data', '')}"
            content.append({"type": "image_url", "image_url": {"url": url}})
        else:
            raise TranslationError(f"contents[{i}].parts[{j}]: {kind} parts are not supported by chat completions")
    if content:
        only_text = all(c["type"] == "text" for c in content)
        results.append({"role": "user", "content": "".join(c["text"] for c in content) if only_text else content})
    return results


def _result_text(response: Any) -> str:
    """A function's response as the tool message's text: the one string it holds (``{"result": "..."}``, as the
    SDK wraps a plain return value), else its JSON."""
    if isinstance(response, dict) and len(response) == 1:
        (value,) = response.values()
        if isinstance(value, str):
            return value
    return json.dumps(response, ensure_ascii=False)


def _chat_tools(tool: Any, i: int) -> list[Body]:
    if not isinstance(tool, dict):
        raise TranslationError(f"tools[{i}] is not an object")
    out: list[Body] = []
    for key, value in tool.items():
        if key not in gemini_wire.FUNCTION_KEYS:
            raise TranslationError(f"tools[{i}]: {key} tools are not supported when the provider speaks chat")
        for declaration in listed(value, f"tools[{i}].{key}"):
            if not isinstance(declaration, dict):
                raise TranslationError(f"tools[{i}].{key} holds a declaration that is not an object")
            schema = field(declaration, "parametersJsonSchema")
            if schema is None and field(declaration, "parameters") is not None:
                schema = json_schema(field(declaration, "parameters"))
            out.append(function_tool(declaration.get("name", ""), declaration.get("description"), schema, None))
    return out


def json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI ``Schema`` as JSON Schema: types in lower case (``OBJECT`` → ``object``), ``nullable``
    as a ``null`` type, keys in camelCase, nested schemas likewise."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: Body = {}
    for key, value in schema.items():
        name = _camel(key)
        if key in _SCHEMA_DROPPED:
            continue
        if name == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif name == "properties" and isinstance(value, dict):
            out["properties"] = {k: json_schema(v) for k, v in value.items()}
        elif name in ("items", "anyOf", "not"):
            out[name] = json_schema(value)
        else:
            out[name] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _tool_choice(config: Body) -> Any:
    mode = config.get("mode")
    if mode is None:
        return None
    if not isinstance(mode, str) or mode not in _MODES:
        raise TranslationError(f"toolConfig.functionCallingConfig.mode {mode!r} is not supported")
    allowed = field(config, "allowedFunctionNames")
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        return {"type": "function", "function": {"name": str(allowed[0])}}
    return _MODES[mode]


def _generation(config: Body) -> Body:
    if (field(config, "candidateCount") or 1) != 1:
        raise TranslationError("generationConfig.candidateCount other than 1 is not supported")
    out: Body = {}
    for name, chat_name in (
        ("temperature", "temperature"),
        ("topP", "top_p"),
        ("maxOutputTokens", "max_tokens"),
        ("stopSequences", "stop"),
        ("seed", "seed"),
        ("presencePenalty", "presence_penalty"),
        ("frequencyPenalty", "frequency_penalty"),
    ):
        if field(config, name) is not None:
            out[chat_name] = field(config, name)
    schema = field(config, "responseJsonSchema")
    if schema is None and field(config, "responseSchema") is not None:
        schema = json_schema(field(config, "responseSchema"))
    if schema is not None:
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
    elif field(config, "responseMimeType") == "application/json":
        out["response_format"] = {"type": "json_object"}
    return out


# --- responses ---------------------------------------------------------------------------------------------


def chat_to_gemini_response(reply: Body, request: Body) -> Body:
    """A chat completion as a ``GenerateContentResponse``.

    Raises:
        TranslationError: a tool call's arguments are not a JSON object (Gemini's ``args`` is one).
    """
    choices = reply.get("choices") or []
    choice = object_of(choices[0]) if isinstance(choices, list) and choices else {}
    message = object_of(choice.get("message"))
    parts: list[Body] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"text": reasoning, "thought": True})
    if isinstance(message.get("content"), str) and message["content"]:
        parts.append({"text": message["content"]})
    for call in message.get("tool_calls") or []:
        call = object_of(call)
        function = object_of(call.get("function"))
        parts.append(_function_call(str(call.get("id", "")), str(function.get("name", "")), function.get("arguments")))
    usage = reply.get("usage")
    return _response(
        parts,
        _FINISH.get(str(choice.get("finish_reason")), "OTHER"),
        chat_wire.read_usage(usage) if isinstance(usage, dict) else None,
        reply.get("model"),
        reply.get("id"),
    )


def _function_call(call_id: str, name: str, arguments: Any) -> Body:
    try:
        args = json.loads(arguments) if arguments else {}
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise TranslationError(f"the arguments of the tool call {name!r} are not a JSON object")
    call: Body = {"name": name, "args": args}
    if call_id:
        call["id"] = call_id
    return {"functionCall": call}


def _response(parts: list[Body], finish: str | None, usage: Any, model: Any, response_id: Any) -> Body:
    """One ``GenerateContentResponse`` (a whole reply, or one event of a stream)."""
    candidate: Body = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: Body = {"candidates": [candidate]}
    if usage is not None:
        body["usageMetadata"] = gemini_wire.usage_object(usage)
    if isinstance(model, str) and model:
        body["modelVersion"] = model
    if isinstance(response_id, str) and response_id:
        body["responseId"] = response_id
    return body


class ChatStreamToGemini(FromChatStream):
    """Chat-completions chunks → Gemini stream events (no event names): one per text delta, and a last one with
    the function calls, the ``finishReason`` and the ``usageMetadata``."""

    def __init__(self, request: Body, model: str) -> None:
        super().__init__()
        self._model = model
        self._id: Any = None
        self._calls: dict[int, list[str]] = {}  # index → [id, name, arguments so far]

    def _opening(self, chunk: Body) -> list[StreamEvent]:
        given = chunk.get("model")
        self._model = given if isinstance(given, str) else self._model
        self._id = chunk.get("id")
        return []

    def _text(self, text: str, refusal: bool) -> list[StreamEvent]:
        return [("", _response([{"text": text}], None, None, self._model, self._id))]

    def _tool_call(self, piece: ToolCallPiece) -> list[StreamEvent]:
        call = self._calls.setdefault(piece.index, ["", "", ""])
        call[0], call[1] = call[0] or piece.id, call[1] or piece.name
        call[2] += piece.arguments
        return []

    def _end(self) -> list[StreamEvent]:
        parts = [_function_call(*self._calls[index]) for index in sorted(self._calls)] or [{"text": ""}]
        finish = _FINISH.get(self._finish or "stop", "OTHER")
        return [("", _response(parts, finish, self._usage, self._model, self._id))]
