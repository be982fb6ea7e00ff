"""What an agent may not ask the provider to do: anything that runs outside the sandbox.

Providers offer tools they run themselves: web search and fetch, code execution, remote MCP servers, file
search. Passed through, any of them would give a network-less agent the network, and the sample would no
longer be locked down. So the gateway refuses a request that names one, whatever the API, before anything
reaches the provider. Tools the agent runs itself (function and custom tools, and Anthropic's client-side
``bash``, ``text_editor``, ``computer`` and ``memory`` tools) are fine: their calls come back to the agent.

The rules are data: one tuple per API, read top to bottom.
"""

from __future__ import annotations

from typing import Any

from runner.gateway.model import Api

#: Per API: the tool ``type`` values an agent may use (``None``: a tool without a type), the type prefixes of
#: client-side tools, and the top-level keys that make the provider reach out on the agent's behalf.
RULES: dict[str, tuple[frozenset[str | None], tuple[str, ...], tuple[str, ...]]] = {
    "chat": (frozenset({None, "function", "custom"}), (), ("web_search_options",)),
    "responses": (frozenset({"function", "custom"}), ("local_shell", "computer_use"), ()),
    "messages": (
        frozenset({None, "custom"}),
        ("bash_", "text_editor_", "computer_", "memory_"),
        ("mcp_servers", "container"),
    ),
    # A Gemini tool has no type: it is an object whose keys say what it holds (functionDeclarations, googleSearch,
    # codeExecution, urlContext...), each read as the tool's type; the API takes camelCase and snake_case keys.
    "gemini": (frozenset({"functionDeclarations", "function_declarations"}), (), ()),
}


def refusal(api: Api, body: dict[str, Any]) -> str | None:
    """Why the request must not reach the provider, or None when it may."""
    allowed, client_prefixes, forbidden_keys = RULES[api]
    for key in forbidden_keys:
        if body.get(key) is not None:
            return f"'{key}' makes the provider act outside the sandbox; the ISPM gateway does not allow it"
    tools = body.get("tools")
    if not isinstance(tools, list):
        return None
    for i, tool in enumerate(tools):
        for kind in _kinds(api, tool):
            if kind in allowed or (isinstance(kind, str) and client_prefixes and kind.startswith(client_prefixes)):
                continue
            if api == "gemini":
                return (
                    f"tools[{i}] has {kind!r}, a tool the provider runs itself (outside the sandbox); only "
                    "functionDeclarations are allowed: leave the provider's tools (Google Search, code execution, "
                    "URL context...) out of the request's tools"
                )
            return (
                f"tools[{i}] has type {kind!r}, a tool the provider runs itself (outside the sandbox); "
                "only tools the agent runs are allowed: function and custom tools"
            )
    return None


def _kinds(api: Api, tool: Any) -> list[str | None]:
    """What a tool is: its ``type`` (``None`` when it has none), or for Gemini each key of the tool object."""
    if api == "gemini":
        return list(tool) if isinstance(tool, dict) and tool else [None]
    return [tool.get("type") if isinstance(tool, dict) else None]
