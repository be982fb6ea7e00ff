"""The model gateway: provider keys stay on the host, and every token is counted.

Read in this order:

- ``model``: the typed hand-offs (``ProviderSpec``, ``ClientSettings``, ``SampleUsage`` and its ``ModelCall`` list).
- ``providers``: the table of providers (OpenAI, Anthropic and seven OpenAI-compatible ones), the keys and base URLs
  they read from the host, the shared retry policy, and the synchronous client the judges and preflight use.
- ``protocols``: pure translation between chat completions, Responses and Messages, and reading usage off each.
- ``bridges``: which API a provider is spoken to in for each agent API, and the translations between them.
- ``upstream``: the gateway's asynchronous hop to the candidate's provider (retries before the first byte).
- ``ledger``: per-sample tokens, caps and accounting.
- ``app``: the agent-facing Starlette app: three model APIs, streamed or not, and ``/v1/models``.
- ``listeners``: uvicorn servers on Unix sockets and loopback TCP, on one event loop thread.
- ``server``: ``Gateway``, the facade the run and the sandbox use.
- ``preflight``: one minimal request per model alias, recording the model id each provider returns.
"""
