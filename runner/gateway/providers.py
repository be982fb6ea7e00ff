"""Provider clients: OpenAI-compatible chat-completions and Anthropic Messages.

Every client has explicit timeouts and retries with tenacity: 429 (honouring ``Retry-After``, capped), 5xx,
connection errors and resets, timeouts, and a 2xx body that is not a JSON object. Other 4xx are never retried.
Keys come from the host environment only and are redacted from every repr, error and recorded body.

The wire is the standard library's ``http.client`` under a small keep-alive pool
(:mod:`runner.gateway.connections`): the gateway forwards every agent step through these clients, and httpx's
per-call CPU (about four times more) was most of the latency it added. httpx is still used when a proxy
environment variable (``HTTPS_PROXY``, ``ALL_PROXY``..., minus ``NO_PROXY``) applies to the endpoint, as it
handles proxy tunnels and proxy credentials, or when a caller passes an httpx ``transport``. Both fail alike:
timeouts and broken connections become retryable :class:`ProviderError` records of kind ``timeout`` and
``connection``.

Models are named ``provider/model`` (``openai/gpt-4.1``, ``anthropic/claude-sonnet-4-6``); the model part may
itself contain slashes (``openai/meta-llama/Llama-3-8B`` for a vLLM server).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Protocol
from urllib.parse import urlsplit

import httpx
import tenacity
from pydantic import BaseModel, ConfigDict, Field

from runner import log
from runner.errors import GatewayError
from runner.gateway import anthropic_translate, connections

_log = log.get(__name__)

ErrorKind = Literal["http_status", "timeout", "connection", "malformed"]
_REDACTED = "[REDACTED]"
_BODY_SNIPPET = 500  # an error body is evidence, not a payload: keep a bounded, redacted prefix


class _Headers(Protocol):
    """Response headers looked up case-insensitively: ``http.client.HTTPMessage`` or ``httpx.Headers``."""

    def get(self, name: str, /) -> str | None: ...


class MissingCredential(GatewayError):
    """The provider's key is not set in the host environment."""

    def __init__(self, provider: str, env_var: str) -> None:
        self.provider = provider
        self.env_var = env_var
        super().__init__(f"{provider}: the API key is missing; set {env_var} in the host environment")


class UnknownProvider(GatewayError):
    """A model reference names a provider we have no client for, or is not ``provider/model``."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        known = ", ".join(sorted(CLIENTS))
        super().__init__(f"unknown model reference {ref!r}: write provider/model, with provider one of {known}")


class BadEndpoint(GatewayError):
    """The base URL is not http(s) with a host, or the key cannot go in a header: no request could be sent."""

    def __init__(self, provider: str, key_env: str, base_env: str) -> None:
        self.provider = provider
        super().__init__(
            f"{provider}: {base_env} is not an http(s) URL with a host, or {key_env} holds a line break or "
            "a non-Latin-1 character"
        )


class ProviderError(GatewayError):
    """A provider call failed, after ``attempts`` tries. ``status`` is the HTTP status, if one arrived."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        provider: str,
        model: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        self.kind = kind
        self.provider = provider
        self.model = model
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = attempts
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        status = f" HTTP {self.status}" if self.status is not None else ""
        where = f"{self.provider}/{self.model}"
        return f"{where}: {self.kind}{status} after {self.attempts} attempt(s): {self.message}"

    def record(self) -> ProviderErrorRecord:
        """The error as a typed record for the run record's accounting."""
        return ProviderErrorRecord(
            kind=self.kind,
            provider=self.provider,
            model=self.model,
            status=self.status,
            retryable=self.retryable,
            attempts=self.attempts,
            message=self.message,
        )


class ProviderErrorRecord(BaseModel):
    """One failed provider call, as recorded in a sample's accounting."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    kind: ErrorKind
    """What went wrong: an HTTP error status, a timeout, a broken connection, or a body that is not JSON."""
    provider: str
    """The provider part of the model reference."""
    model: str
    """The model name sent to the provider."""
    status: int | None
    """The last HTTP status received, or None when no response arrived."""
    retryable: bool
    """Whether the last failure was of a retryable kind (so retries ran out rather than being skipped)."""
    attempts: int
    """How many times the call was tried."""
    message: str
    """A bounded, redacted description; never holds a key."""
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the call finally failed (UTC)."""


class ClientSettings(BaseModel):
    """Timeouts and retry policy of a provider client. The defaults suit long, non-streamed LLM replies."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    connect_timeout: float = 10.0
    """Seconds to open a connection."""
    read_timeout: float = 300.0
    """Seconds to wait for response bytes; a hung provider counts as a retryable timeout."""
    write_timeout: float = 30.0
    """Seconds to send the request."""
    pool_timeout: float = 30.0
    """Seconds to wait for a free pooled connection."""
    max_attempts: int = Field(default=5, ge=1)
    """Tries per call, the first included; also bounds retries of malformed bodies."""
    max_elapsed: float = 600.0
    """No new try starts after this many seconds since the first."""
    retry_after_cap: float = 60.0
    """Upper bound on a provider's ``Retry-After``, so a hostile or confused header cannot stall a run."""
    backoff_initial: float = 0.5
    """Base of the jittered exponential backoff used when no ``Retry-After`` is given."""
    backoff_max: float = 30.0
    """Upper bound of one backoff wait."""
    max_connections: int = 32
    """Connection pool size; two samples plus judges need far fewer."""


class ProviderResult(BaseModel):
    """A successful call, normalized across providers."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    provider: str
    """The provider part of the model reference."""
    model: str
    """The model name we asked for."""
    returned_model: str | None
    """The model id the provider returned on the wire (what the contract records)."""
    input_tokens: int
    """Prompt tokens, cached ones included."""
    output_tokens: int
    """Completion tokens."""
    cached_tokens: int
    """Prompt tokens served from the provider's cache (a subset of ``input_tokens``)."""
    latency_s: float
    """Wall time of the whole call, retries and waits included."""
    attempts: int
    """How many tries it took."""
    body: dict[str, Any]
    """The provider's parsed response body, in its own protocol."""
    raw: bytes = Field(default=b"", repr=False)
    """The response bytes, for pass-through without re-serializing."""
    completion: dict[str, Any] | None = Field(default=None, repr=False)
    """The reply as a chat-completions body; set by :meth:`ProviderClient.chat`."""


def parse_model(ref: str) -> tuple[str, str]:
    """Split ``provider/model`` at the first slash.

    Raises:
        UnknownProvider: no slash, an empty part, or a provider without a client.
    """
    provider, _, model = ref.partition("/")
    if not model or provider not in CLIENTS:
        raise UnknownProvider(ref)
    return provider, model


def client_for(ref: str, settings: ClientSettings | None = None, **kwargs: Any) -> tuple[ProviderClient, str]:
    """A client configured from the host environment for ``ref``, and the model name to send.

    Raises:
        UnknownProvider: see :func:`parse_model`.
        MissingCredential: the provider's key variable is unset or empty.
        BadEndpoint: the base URL or the key cannot make a request.
    """
    provider, model = parse_model(ref)
    return CLIENTS[provider](settings, **kwargs), model


class ProviderClient(ABC):
    """A thread-safe client of one provider endpoint. Subclasses set the protocol details."""

    provider: ClassVar[str]
    key_env: ClassVar[str]
    base_env: ClassVar[str]
    default_base: ClassVar[str]
    path: ClassVar[str]

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Read the key and base URL from the host environment.

        ``sleep`` is the wait between retries (tests pass a recorder). ``transport`` makes the client use
        httpx with that transport instead of :mod:`~runner.gateway.connections`.

        Raises:
            MissingCredential: the key variable is unset or empty.
            BadEndpoint: the base URL or the key cannot make a request.
        """
        # The key lives on self only (whose repr redacts it): a traceback rendered with locals never shows it.
        self._key = os.environ.get(self.key_env, "")
        if not self._key:
            raise MissingCredential(self.provider, self.key_env)
        self.base_url = (os.environ.get(self.base_env) or self.default_base).rstrip("/")
        self.settings = s = settings or ClientSettings()
        # One Retrying per client: tenacity keeps per-call state thread-local, and building it per call shows
        # up on the gateway's hot path.
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(s.max_attempts) | tenacity.stop_after_delay(s.max_elapsed),
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            sleep=sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        self._pool: connections.Pool | None = None
        self._http: httpx.Client | None = None
        if not self._open_wire(transport):
            raise BadEndpoint(self.provider, self.key_env, self.base_env)

    def _open_wire(self, transport: httpx.BaseTransport | None) -> bool:
        """Set up the connection pool (or httpx, for a proxy or a given transport); False if no request can go."""
        s = self.settings
        headers = {**self._auth_headers(self._key), "content-type": "application/json"}
        if transport is None and not _proxied(self.base_url):
            try:
                self._pool = connections.Pool(
                    self.base_url,
                    headers,
                    connect_timeout=s.connect_timeout,
                    read_timeout=s.read_timeout,
                    write_timeout=s.write_timeout,
                    pool_timeout=s.pool_timeout,
                    max_connections=s.max_connections,
                )
            except ValueError:  # raised from here, its traceback would show the headers: the caller raises
                return False
        else:
            self._http = httpx.Client(
                timeout=httpx.Timeout(
                    connect=s.connect_timeout, read=s.read_timeout, write=s.write_timeout, pool=s.pool_timeout
                ),
                limits=httpx.Limits(max_connections=s.max_connections, max_keepalive_connections=s.max_connections),
                headers=headers,
                transport=transport,
            )
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, key={_REDACTED})"

    def close(self) -> None:
        """Close pooled connections."""
        if self._pool is not None:
            self._pool.close()
        if self._http is not None:
            self._http.close()

    @abstractmethod
    def _auth_headers(self, key: str) -> dict[str, str]: ...

    @abstractmethod
    def _usage(self, body: dict[str, Any]) -> tuple[int, int, int]: ...

    @abstractmethod
    def _to_native(self, chat: dict[str, Any], model: str) -> dict[str, Any]: ...

    @abstractmethod
    def _to_chat(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def chat(self, model: str, request: dict[str, Any]) -> ProviderResult:
        """Send a chat-completions ``request`` to ``model``; the result's ``completion`` is chat-completions.

        The request's own ``model`` field is replaced. Raises what :meth:`send` raises, and
        ``anthropic_translate.TranslationError`` for a request the provider's protocol cannot express.
        """
        result = self.send(model, self._to_native(request, model))
        result.completion = self._to_chat(result.body)
        return result

    def send(self, model: str, body: dict[str, Any]) -> ProviderResult:
        """POST ``body`` (in the provider's own protocol) with retries and return the normalized result.

        Raises:
            ProviderError: the last try failed, or a non-retryable 4xx came back; ``attempts`` says how many
                tries ran.
        """
        payload = json.dumps({**body, "model": model}).encode()
        url = self.base_url + self.path
        tries = 0
        started = time.perf_counter()

        def attempt() -> ProviderResult:
            nonlocal tries
            tries += 1
            try:
                return self._attempt(url, model, payload, started, tries)
            except ProviderError as exc:
                exc.attempts = tries
                raise

        return self._retrying(attempt)

    def _attempt(self, url: str, model: str, payload: bytes, started: float, tries: int) -> ProviderResult:
        def fail(kind: ErrorKind, message: str, **kw: Any) -> ProviderError:
            return ProviderError(self._redact(message), kind=kind, provider=self.provider, model=model, **kw)

        try:
            status, headers, raw = self._post(url, payload)
        except connections.Timeout as exc:
            raise fail("timeout", f"{exc.name} calling {url}", retryable=True) from None
        except connections.Broken as exc:
            # ConnectError, ReadError (reset), RemoteProtocolError (peer closed mid-response) and kin.
            raise fail("connection", f"{exc.name} calling {url}: {exc}", retryable=True) from None
        if status >= 400:
            retryable = status == 429 or status >= 500
            # Redact before cutting: a cut could leave a key prefix that no longer matches the whole key.
            snippet = self._redact(raw.decode("utf-8", "replace"))[:_BODY_SNIPPET]
            raise fail(
                "http_status",
                f"{url} answered {status}: {snippet}",
                status=status,
                retryable=retryable,
                retry_after=_retry_after(headers) if retryable else None,
            )
        if self._key.encode() in raw:  # a provider echoing our key must not pass it on to an agent
            raw = raw.replace(self._key.encode(), _REDACTED.encode())
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            message = f"{url} answered {status} with a body that is not a JSON object"
            raise fail("malformed", message, status=status, retryable=True)
        inp, out, cached = self._usage(body)
        returned = body.get("model")
        return ProviderResult.model_construct(  # the fields are built here, validation would only cost time
            provider=self.provider,
            model=model,
            returned_model=returned if isinstance(returned, str) else None,
            input_tokens=inp,
            output_tokens=out,
            cached_tokens=cached,
            latency_s=time.perf_counter() - started,
            attempts=tries,
            body=body,
            raw=raw,
            completion=None,
        )

    def _post(self, url: str, payload: bytes) -> tuple[int, _Headers, bytes]:
        """One POST on whichever wire the client uses; failures as :mod:`~runner.gateway.connections` raises them."""
        if self._pool is not None:
            return self._pool.post(self.path, payload)
        assert self._http is not None
        try:
            resp = self._http.post(url, content=payload)
            return resp.status_code, resp.headers, resp.content
        except httpx.TimeoutException as exc:
            raise connections.Timeout(type(exc).__name__) from None
        except httpx.TransportError as exc:
            raise connections.Broken(type(exc).__name__, str(exc)) from None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(exc.retry_after, self.settings.retry_after_cap)
        backoff = tenacity.wait_random_exponential(
            multiplier=self.settings.backoff_initial, max=self.settings.backoff_max
        )
        return float(backoff(state))

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError):
            _log.warning(
                "provider_retry",
                provider=self.provider,
                model=exc.model,
                kind=exc.kind,
                status=exc.status,
                attempt=state.attempt_number,
                wait_s=round(state.upcoming_sleep, 3),
            )

    def _redact(self, text: str) -> str:
        return text.replace(self._key, _REDACTED) if self._key else text


def _proxied(url: str) -> bool:
    """Whether httpx, trusting the environment as it does by default, would send ``url`` through a proxy."""
    proxies = urllib.request.getproxies_environment()
    scheme = url.partition(":")[0].lower()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    host = urlsplit(url).hostname or ""
    return not urllib.request.proxy_bypass_environment(host, proxies)  # type: ignore[attr-defined]  # not in typeshed


def _retry_after(headers: _Headers) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI sends it) or ``Retry-After`` in seconds; dates are ignored."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


class OpenAIClient(ProviderClient):
    """Any OpenAI-compatible ``/chat/completions`` endpoint: OpenAI, vLLM, llama.cpp, Ollama."""

    provider = "openai"
    key_env = "OPENAI_API_KEY"
    base_env = "OPENAI_BASE_URL"
    default_base = "https://api.openai.com/v1"
    path = "/chat/completions"

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def _usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        usage = body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return (
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            int(details.get("cached_tokens") or 0),
        )

    def _to_native(self, chat: dict[str, Any], model: str) -> dict[str, Any]:
        return chat

    def _to_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return body


class AnthropicClient(ProviderClient):
    """Anthropic's Messages API."""

    provider = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    base_env = "ANTHROPIC_BASE_URL"
    default_base = "https://api.anthropic.com"
    path = "/v1/messages"
    api_version = "2023-06-01"

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key, "anthropic-version": self.api_version}

    def _usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        return anthropic_translate.usage_of(body)

    def _to_native(self, chat: dict[str, Any], model: str) -> dict[str, Any]:
        return anthropic_translate.to_messages_request(chat, model)

    def _to_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return anthropic_translate.to_chat_completion(body)


#: Provider name → client class. Explicit, not registration by import side effect.
CLIENTS: dict[str, type[ProviderClient]] = {"openai": OpenAIClient, "anthropic": AnthropicClient}
