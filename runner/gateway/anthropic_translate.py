"""Chat-completions ⇄ Anthropic Messages, as pure functions over JSON-shaped dicts.

Agents speak only chat-completions to the gateway; when the candidate is ``anthropic/*`` the gateway maps the
request to Messages and the reply back. Mapping rules:

- ``system``/``developer`` messages become the top-level ``system`` text (Messages has no system role).
- assistant ``tool_calls`` become ``tool_use`` blocks; ``tool`` messages become ``tool_result`` blocks in a
  user turn. Consecutive turns of the same role are merged, because Messages wants the tool results for one
  assistant turn together in the next user turn.
- ``stop_reason`` maps to ``finish_reason``; usage maps so that ``prompt_tokens`` counts every input token,
  cached or not, as OpenAI's does.
"""

from __future__ import annotations

import json
import time
from typing import Any

from runner.errors import GatewayError

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


class TranslationError(GatewayError):
    """A chat-completions request cannot be expressed as a Messages request (the agent's fault: HTTP 400)."""


def to_messages_request(chat: dict[str, Any], model: str) -> dict[str, Any]:
    """Translate a chat-completions request body into a Messages request body for ``model``.

    Raises:
        TranslationError: the request uses something Messages cannot express (``n`` > 1, malformed tool
            arguments, unknown roles or content parts).
    """
    if chat.get("n", 1) != 1:
        raise TranslationError("n > 1 is not supported for anthropic/* models")
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for i, msg in enumerate(chat.get("messages") or []):
        if not isinstance(msg, dict):
            raise TranslationError(f"messages[{i}] is not an object")
        role = msg.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(msg.get("content"), i))
            continue
        if role == "user":
            blocks = _content_blocks(msg.get("content"), i)
        elif role == "assistant":
            blocks = _content_blocks(msg.get("content"), i) + _tool_use_blocks(msg.get("tool_calls"), i)
        elif role == "tool":
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": str(msg.get("tool_call_id", "")),
                    "content": _text_of(msg.get("content"), i),
                }
            ]
        else:
            raise TranslationError(f"messages[{i}] has unsupported role {role!r}")
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
    if system:
        out["system"] = "\n\n".join(system)
    for key in ("temperature", "top_p"):
        if chat.get(key) is not None:
            out[key] = chat[key]
    stop = chat.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if chat.get("tools"):
        out["tools"] = [_tool_def(t, i) for i, t in enumerate(chat["tools"])]
    choice = _tool_choice(chat.get("tool_choice"), chat.get("parallel_tool_calls"))
    if choice is not None and out.get("tools"):
        out["tool_choice"] = choice
    return out


def to_chat_completion(msg: dict[str, Any]) -> dict[str, Any]:
    """Translate a Messages response body into a chat-completions response body.

    Thinking blocks are dropped: chat-completions has no place for them and the judges read ``answer.json``.
    """
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in msg.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": block.get("id", ""),
                    "type": "function",
                    "function": {
                        "name": block.get("name", ""),
                        "arguments": json.dumps(block.get("input", {})),
                    },
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    prompt, completion, cached = usage_of(msg)
    return {
        "id": msg.get("id", ""),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": msg.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _FINISH.get(str(msg.get("stop_reason")), "stop"),
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def usage_of(msg: dict[str, Any]) -> tuple[int, int, int]:
    """``(input, output, cached)`` tokens of a Messages response; input includes cache reads and writes."""
    usage = msg.get("usage") or {}
    cached = int(usage.get("cache_read_input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    return (
        int(usage.get("input_tokens") or 0) + cached + created,
        int(usage.get("output_tokens") or 0),
        cached,
    )


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
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            blocks.append(_image_block(str((part.get("image_url") or {}).get("url", ""))))
        else:
            raise TranslationError(f"messages[{i}] has unsupported content part type {kind!r}")
    return blocks


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_use_blocks(tool_calls: Any, i: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for call in tool_calls or []:
        fn = call.get("function") or {}
        raw = fn.get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise TranslationError(f"messages[{i}] tool call {call.get('id')!r}: arguments are not JSON") from exc
        if not isinstance(args, dict):
            raise TranslationError(f"messages[{i}] tool call {call.get('id')!r}: arguments must be an object")
        blocks.append({"type": "tool_use", "id": str(call.get("id", "")), "name": fn.get("name", ""), "input": args})
    return blocks


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
