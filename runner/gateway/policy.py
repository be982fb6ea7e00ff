"""What an agent may not ask the provider to do: anything that runs outside the sandbox.

Providers offer tools they run themselves: web search and fetch, code execution, remote MCP servers, file
search. Passed through, any of them would give a network-less agent the network, and the sample would no
longer be locked down. So the gateway refuses a request that names one, whatever the API, before anything
reaches the provider. Tools the agent runs itself (function and custom tools, and Anthropic's client-side
``bash``, ``text_editor``, ``computer`` and ``memory`` tools) are fine: their calls come back to the agent. A
Responses ``namespace`` tool only groups such tools under one name (Codex sends its sub-agent tools so), so it is
fine too, and every tool inside it is checked like any other; so is a ``tool_search`` the agent runs
(``execution: "client"``), and the tools its output hands the model.

A refusal names the setting that stops the agent from asking, where a known agent has one (:data:`TURN_OFF`).

The rules are data: one tuple per API, read top to bottom.
"""

from __future__ import annotations

from typing import Any

from runner.gateway.model import Api

#: Per API: the tool ``type`` values an agent may use (``None``: a tool without a type), the type prefixes of
#: client-side tools, and the top-level keys that make the provider reach out on the agent's behalf.
RULES: dict[str, tuple[frozenset[str | None], tuple[str, ...], tuple[str, ...]]] = {
    "chat": (frozenset({None, "function", "custom"}), (), ("web_search_options",)),
    "responses": (frozenset({"function", "custom", "namespace"}), ("local_shell", "computer_use"), ()),
    "messages": (
        frozenset({None, "custom"}),
        ("bash_", "text_editor_", "computer_", "memory_"),
        ("mcp_servers", "container"),
    ),
    # A Gemini tool has no type: it is an object whose keys say what it holds (functionDeclarations, googleSearch,
    # codeExecution, urlContext...), each read as the tool's type; the API takes camelCase and snake_case keys.
    "gemini": (frozenset({"functionDeclarations", "function_declarations"}), (), ()),
}

#: Tool type prefix → how to stop a known agent from sending it, quoted in the refusal.
TURN_OFF: dict[str, str] = {
    "web_search": 'Codex CLI turns it off with web_search = "disabled" in its config.toml',
    "image_generation": "Codex CLI turns it off with image_generation = false under [features] in its config.toml",
}


def refusal(api: Api, body: dict[str, Any]) -> str | None:
    """Why the request must not reach the provider, or None when it may."""
    _, _, forbidden_keys = RULES[api]
    for key in forbidden_keys:
        if body.get(key) is not None:
            return f"'{key}' makes the provider act outside the sandbox; the ISPM gateway does not allow it"
    tools = body.get("tools")
    why = _tools_refusal(api, tools, "tools") if isinstance(tools, list) else None
    items = body.get("input") if api == "responses" else None
    for i, item in enumerate(items if isinstance(items, list) else []):
        # A client-run tool search hands the model more tools in its output: they are offered as any other.
        found = item.get("tools") if isinstance(item, dict) and item.get("type") == "tool_search_output" else None
        if why is None and isinstance(found, list):
            why = _tools_refusal(api, found, f"input[{i}].tools")
    return why


def _tools_refusal(api: Api, tools: list[Any], where: str) -> str | None:
    allowed, client_prefixes, _ = RULES[api]
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if api != "gemini" and kind == "namespace" and isinstance(tool, dict):
            inner = tool.get("tools")
            if not isinstance(inner, list):
                return f"{where}[{i}] is a namespace without a tools list"
            why = _tools_refusal(api, inner, f"{where}[{i}].tools")
            if why is not None:
                return why
            continue
        if api == "responses" and kind == "tool_search" and tool.get("execution") == "client":
            continue  # the agent searches its own deferred tools; the provider's ("server") stays refused
        for kind in _kinds(api, tool):
            if kind in allowed or (isinstance(kind, str) and client_prefixes and kind.startswith(client_prefixes)):
                continue
            if api == "gemini":
                return (
                    f"{where}[{i}] has {kind!r}, a tool the provider runs itself (outside the sandbox); only "
                    "functionDeclarations are allowed: leave the provider's tools (Google Search, code execution, "
                    "URL context...) out of the request's tools"
                )
            hint = next((f"; {how}" for prefix, how in TURN_OFF.items() if str(kind).startswith(prefix)), "")
            return (
                f"{where}[{i}] has type {kind!r}, a tool the provider runs itself (outside the sandbox); "
                f"only tools the agent runs are allowed: function and custom tools{hint}"
            )
    return None


def _kinds(api: Api, tool: Any) -> list[str | None]:
    """What a tool is: its ``type`` (``None`` when it has none), or for Gemini each key of the tool object."""
    if api == "gemini":
        return list(tool) if isinstance(tool, dict) and tool else [None]
    return [tool.get("type") if isinstance(tool, dict) else None]
