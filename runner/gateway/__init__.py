"""The model gateway: provider keys stay on the host, and every token is counted.

- ``providers``: HTTP clients for OpenAI-compatible endpoints and Anthropic Messages, with explicit timeouts,
  tenacity retries and typed errors. The judges share them.
- ``connections``: the keep-alive connection pool under ``providers``, on the standard library's ``http.client``
  and ``ssl`` (httpx remains for proxied endpoints).
- ``anthropic_translate``: pure functions mapping chat-completions requests/responses to and from Messages.
- ``server``: the host-side HTTP server speaking chat-completions to agents, with per-sample bearer tokens,
  per-sample accounting and optional caps. It listens on a Unix socket (for network-less containers) and/or on
  127.0.0.1.
- ``preflight``: one minimal request per model alias, recording the model id each provider returns.
"""
