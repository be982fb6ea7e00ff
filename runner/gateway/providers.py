"""Providers: the table of who can serve a model, and the synchronous client the judges and preflight use.

A model is named ``provider/model`` (``openai/gpt-4.1``, ``anthropic/claude-sonnet-4-6``,
``vllm/meta-llama/Llama-3-8B``); the model part may itself contain slashes. :data:`PROVIDERS` says, for each
provider, its wire API (OpenAI-compatible chat completions, or Anthropic Messages), the host variables holding
its key and base URL, and how the key is sent. Keys come from the host environment only and are redacted from
every repr, error and recorded body.

The client retries with tenacity: 429 (honouring ``Retry-After``, capped), 5xx, connection errors, timeouts,
and a 2xx body that is not a JSON object. Other 4xx are never retried. The wire is httpx (proxies from the
environment, certificates from ``SSL_CERT_FILE``/``SSL_CERT_DIR`` or certifi). The gateway's asynchronous
provider hop (:mod:`runner.gateway.upstream`) shares this module's table, error type and retry policy.
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

import httpx
import tenacity

from runner import log
from runner.call import Body, CallApi, ModelCall
from runner.errors import GatewayError
from runner.gateway.model import (
    ClientSettings,
    ErrorKind,
    ProviderErrorRecord,
    ProviderResult,
    ProviderSpec,
)
from runner.gateway.protocols import TranslationError, chat_messages, reader_for
from runner.transcript.redact import longest_first, redact_raw, redact_text

_log = log.get(__name__)

REDACTED = "[REDACTED]"
BODY_SNIPPET = 500  # an error body is evidence, not a payload: keep a bounded, redacted prefix
ANTHROPIC_VERSION = "2023-06-01"

#: Every provider, by the name used in model references. Each OpenAI-compatible one has its own variables, so
#: a run can mix them (a vLLM candidate judged by OpenAI and Anthropic models).
PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            name="openai",
            wire="chat",
            responses=True,
            key_env="OPENAI_API_KEY",
            base_env="OPENAI_BASE_URL",
            default_base="https://api.openai.com/v1",
            note="OpenAI",
        ),
        ProviderSpec(
            name="anthropic",
            wire="messages",
            key_env="ANTHROPIC_API_KEY",
            base_env="ANTHROPIC_BASE_URL",
            default_base="https://api.anthropic.com",
            auth="x-api-key",
            note="Anthropic Messages",
        ),
        ProviderSpec(
            name="openrouter",
            wire="chat",
            key_env="OPENROUTER_API_KEY",
            base_env="OPENROUTER_BASE_URL",
            default_base="https://openrouter.ai/api/v1",
            note="OpenRouter",
        ),
        ProviderSpec(
            name="together",
            wire="chat",
            key_env="TOGETHER_API_KEY",
            base_env="TOGETHER_BASE_URL",
            default_base="https://api.together.xyz/v1",
            note="Together AI",
        ),
        ProviderSpec(
            name="groq",
            wire="chat",
            key_env="GROQ_API_KEY",
            base_env="GROQ_BASE_URL",
            default_base="https://api.groq.com/openai/v1",
            note="Groq",
        ),
        ProviderSpec(
            name="google",
            wire="chat",
            key_env="GEMINI_API_KEY",
            base_env="GEMINI_BASE_URL",
            default_base="https://generativelanguage.googleapis.com/v1beta/openai",
            gemini=True,
            note="Gemini through its OpenAI-compatible endpoint; a Gemini agent through its own API, one level up",
        ),
        ProviderSpec(
            name="azure",
            wire="chat",
            responses=True,
            key_env="AZURE_OPENAI_API_KEY",
            base_env="AZURE_OPENAI_BASE_URL",
            default_base=None,
            auth="api-key",
            note="Azure OpenAI, v1 API: https://<resource>.openai.azure.com/openai/v1; the model is the deployment",
        ),
        ProviderSpec(
            name="vllm",
            wire="chat",
            key_env="VLLM_API_KEY",
            key_required=False,
            base_env="VLLM_BASE_URL",
            default_base=None,
            note="a vLLM server: http://<host>:8000/v1",
        ),
        ProviderSpec(
            name="ollama",
            wire="chat",
            key_env="OLLAMA_API_KEY",
            key_required=False,
            base_env="OLLAMA_BASE_URL",
            default_base="http://127.0.0.1:11434/v1",
            note="an Ollama server",
        ),
    )
}

#: Gemini's own API, under a provider's Gemini base URL (:attr:`Endpoint.gemini_base`): the model and whether to
#: stream are in the path.
GEMINI_PATHS: dict[bool, str] = {
    False: "/models/{model}:generateContent",
    True: "/models/{model}:streamGenerateContent?alt=sse",
}

#: Where each wire API lives under a provider's base URL.
PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "responses": "/responses",
    "messages": "/v1/messages",
    "count_tokens": "/v1/messages/count_tokens",
}


class Headers(Protocol):
    """Response headers looked up case-insensitively (``httpx.Headers``)."""

    def get(self, name: str, /) -> str | None: ...


class MissingCredential(GatewayError):
    """A variable the provider needs (its key, or its base URL where there is no default) is not set."""

    def __init__(self, provider: str, env_var: str, what: str = "the API key") -> None:
        self.provider = provider
        self.env_var = env_var
        super().__init__(f"{provider}: {what} is missing; set {env_var} in the host environment")


class UnknownProvider(GatewayError):
    """A model reference names a provider we have no entry for, or is not ``provider/model``."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        known = ", ".join(sorted(PROVIDERS))
        super().__init__(f"unknown model reference {ref!r}: write provider/model, with provider one of {known}")


class BadEndpoint(GatewayError):
    """The base URL is not http(s) with a host, or the key cannot go in a header: no request could be sent."""

    def __init__(self, provider: str, key_env: str | None, base_env: str) -> None:
        self.provider = provider
        key = f", or {key_env} holds a line break or a non-Latin-1 character" if key_env else ""
        super().__init__(f"{provider}: {base_env} is not an http(s) URL with a host{key}")


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


def host_secrets(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Every provider key in the host environment, and ``extra``, longest first: what no transcript may hold."""
    found = {os.environ.get(spec.key_env, "") for spec in PROVIDERS.values() if spec.key_env}
    return longest_first(found | set(extra))


def parse_model(ref: str) -> tuple[str, str]:
    """Split ``provider/model`` at the first slash.

    Raises:
        UnknownProvider: no slash, an empty part, or a provider without an entry.
    """
    provider, _, model = ref.partition("/")
    if not model or provider not in PROVIDERS:
        raise UnknownProvider(ref)
    return provider, model


class Endpoint:
    """A provider resolved from the host environment: its base URL and the headers that carry its key.

    The key lives on this object only, whose repr redacts it, so a traceback rendered with locals never shows it.
    """

    def __init__(self, spec: ProviderSpec, environ: Mapping[str, str] | None = None) -> None:
        """Read the key and base URL from ``environ`` (the process environment by default).

        Raises:
            MissingCredential: the key, or a base URL without a default, is unset or empty.
            BadEndpoint: the base URL or the key cannot make a request.
        """
        env = os.environ if environ is None else environ
        self.spec = spec
        self.key = env.get(spec.key_env, "") if spec.key_env else ""
        if spec.key_required and not self.key:
            raise MissingCredential(spec.name, str(spec.key_env))
        base = env.get(spec.base_env) or spec.default_base
        if not base:
            raise MissingCredential(spec.name, spec.base_env, "the base URL")
        self.base_url = base.rstrip("/")
        parts = urlsplit(self.base_url)
        # No local holds the key or its headers: a traceback rendered with locals shows none.
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or any(c in self.key for c in "\r\n")
            or not self.key.isascii()
        ):
            raise BadEndpoint(spec.name, spec.key_env, spec.base_env)

    def __repr__(self) -> str:
        return f"Endpoint({self.spec.name!r}, base_url={self.base_url!r}, key={REDACTED})"

    def auth_headers(self) -> dict[str, str]:
        """The headers that carry the key (none for a keyless local server), plus Anthropic's version."""
        headers: dict[str, str] = {}
        if self.key:
            if self.spec.auth == "bearer":
                headers["authorization"] = f"Bearer {self.key}"
            else:
                headers[self.spec.auth] = self.key
        if self.spec.wire == "messages":
            headers["anthropic-version"] = ANTHROPIC_VERSION
        return headers

    @property
    def gemini_base(self) -> str:
        """Where Gemini's own API is: the base URL less a last ``/openai`` (Google's OpenAI-compatible endpoint)."""
        return self.base_url.removesuffix("/openai")

    def gemini_headers(self) -> dict[str, str]:
        """The header that carries the key on Gemini's own API, ``x-goog-api-key`` (none for a keyless server)."""
        return {"x-goog-api-key": self.key} if self.key else {}

    def redact(self, text: str) -> str:
        """``text`` with the key replaced (a short key only where it stands whole: never inside a model id)."""
        return redact_text(text, (self.key,)) if self.key else text

    def redact_bytes(self, raw: bytes) -> bytes:
        """``raw`` with the key replaced as :meth:`redact` does: a provider echoing our key must not pass it on to
        an agent."""
        return redact_raw(raw, (self.key,)) if self.key else raw


def ssl_context() -> ssl.SSLContext:
    """Verify certificates and host names against ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when set, else certifi."""
    return _ssl_context(os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)


@functools.lru_cache(maxsize=4)
def _ssl_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    # Loading a CA bundle takes ~0.1 s; a context is safe to share between clients and threads.
    if not cafile and not capath:
        import certifi  # httpx's own CA bundle, installed with it

        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile, capath=capath)


def httpx_timeout(s: ClientSettings) -> httpx.Timeout:
    """The settings' timeouts as httpx takes them."""
    return httpx.Timeout(connect=s.connect_timeout, read=s.read_timeout, write=s.write_timeout, pool=s.pool_timeout)


def httpx_limits(s: ClientSettings) -> httpx.Limits:
    """The settings' pool size as httpx takes it."""
    return httpx.Limits(max_connections=s.max_connections, max_keepalive_connections=s.max_connections)


def status_failure(
    endpoint: Endpoint, model: str, url: str, status: int, headers: Headers, raw: bytes
) -> ProviderError:
    """The error for an HTTP error status: 429 and 5xx are retryable (with their ``Retry-After``)."""
    retryable = status == 429 or status >= 500
    # Redact before cutting: a cut could leave a key prefix that no longer matches the whole key.
    snippet = endpoint.redact(raw.decode("utf-8", "replace"))[:BODY_SNIPPET]
    return ProviderError(
        endpoint.redact(f"{url} answered {status}: {snippet}"),
        kind="http_status",
        provider=endpoint.spec.name,
        model=model,
        status=status,
        retryable=retryable,
        retry_after=retry_after(headers) if retryable else None,
    )


def transport_failure(endpoint: Endpoint, model: str, url: str, exc: httpx.TransportError) -> ProviderError:
    """The retryable error for a timeout or a broken connection (never with the request's headers)."""
    kind: ErrorKind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection"
    detail = "" if kind == "timeout" else f": {str(exc)[:200]}"
    return ProviderError(
        endpoint.redact(f"{type(exc).__name__} calling {url}{detail}"),
        kind=kind,
        provider=endpoint.spec.name,
        model=model,
        retryable=True,
    )


def retry_after(headers: Headers) -> float | None:
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


class RetryPolicy:
    """The retry rules shared by the judges' client and the gateway's provider hop."""

    def __init__(self, settings: ClientSettings, provider: str) -> None:
        self.settings = settings
        self.provider = provider

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``tenacity.Retrying`` or ``tenacity.AsyncRetrying`` (add ``sleep``)."""
        s = self.settings
        return {
            "stop": tenacity.stop_after_attempt(s.max_attempts) | tenacity.stop_after_delay(s.max_elapsed),
            "wait": self.wait,
            "retry": tenacity.retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            "before_sleep": self.log_retry,
            "reraise": True,
        }

    def wait(self, state: tenacity.RetryCallState) -> float:
        """The provider's ``Retry-After`` (capped), else jittered exponential backoff."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(exc.retry_after, self.settings.retry_after_cap)
        backoff = tenacity.wait_random_exponential(
            multiplier=self.settings.backoff_initial, max=self.settings.backoff_max
        )
        return float(backoff(state))

    def log_retry(self, state: tenacity.RetryCallState) -> None:
        """One structured line per retry."""
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


def client_for(ref: str, settings: ClientSettings | None = None, **kwargs: Any) -> tuple[ProviderClient, str]:
    """A client configured from the host environment for ``ref``, and the model name to send.

    Raises:
        UnknownProvider: see :func:`parse_model`.
        MissingCredential: a variable the provider needs is unset or empty.
        BadEndpoint: the base URL or the key cannot make a request.
    """
    provider, model = parse_model(ref)
    return ProviderClient(settings, spec=PROVIDERS[provider], **kwargs), model


class ProviderClient:
    """A thread-safe, synchronous client of one provider, speaking chat completions to its callers.

    The judges and preflight use it; subclasses fix ``default_spec`` for callers that name the provider.
    """

    default_spec: ClassVar[ProviderSpec | None] = None

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        spec: ProviderSpec | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Read the key and base URL from the host environment.

        ``sleep`` is the wait between retries (tests pass a recorder); ``transport`` replaces httpx's.

        Raises:
            MissingCredential: a variable the provider needs is unset or empty.
            BadEndpoint: the base URL or the key cannot make a request.
        """
        chosen = spec or self.default_spec
        if chosen is None:
            raise GatewayError("ProviderClient needs a provider spec")
        self.endpoint = Endpoint(chosen)
        self.spec = chosen
        self.provider = chosen.name
        self.key_env = chosen.key_env
        self.base_url = self.endpoint.base_url
        self.settings = s = settings or ClientSettings()
        self.path = PATHS[chosen.wire]
        # One Retrying per client: tenacity keeps per-call state thread-local.
        self._retrying = tenacity.Retrying(sleep=sleep, **RetryPolicy(s, chosen.name).arguments())
        self._http = httpx.Client(
            timeout=httpx_timeout(s),
            limits=httpx_limits(s),
            headers={**self.endpoint.auth_headers(), "content-type": "application/json"},
            transport=transport,
            verify=ssl_context(),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, key={REDACTED})"

    def close(self) -> None:
        """Close pooled connections."""
        self._http.close()

    def chat(
        self, model: str, request: dict[str, Any], *, emit: Callable[[ModelCall], None] | None = None
    ) -> ProviderResult:
        """Send a chat-completions ``request`` to ``model``; the result's ``completion`` is chat-completions.

        The request's own ``model`` field is replaced. However the call ends, ``emit`` (when given) gets it once, as a
        :class:`~runner.call.ModelCall` (the request as sent, the reply read, its figures). Raises what :meth:`send`
        raises, and ``protocols.TranslationError`` for a request the provider's protocol cannot express.
        """
        started_at, started = datetime.now(UTC), time.perf_counter()
        sent = {**request, "model": model}
        asked: dict[str, Any] = {  # who asked what: the chat request as sent, whichever API the provider speaks
            "api": "chat",
            "requested_model": model,
            "stream": False,
            "started_at": started_at,
            "request": Body(encoding="json", content=sent, size=len(json.dumps(sent))),
        }
        try:
            if self.spec.wire == "messages":
                result = self.send(model, chat_messages.chat_to_messages_request(request, model))
                result.completion = chat_messages.messages_to_chat_response(result.body)
            else:
                result = self.send(model, request)
                result.completion = result.body
        except (ProviderError, TranslationError) as exc:
            if emit is not None:
                failed = ModelCall(
                    api="chat",
                    provider_api=self.spec.wire,
                    requested_model=model,
                    stream=False,
                    status=exc.status if isinstance(exc, ProviderError) and exc.status is not None else 0,
                    outcome="provider_error",
                )
                emit(
                    failed.model_copy(
                        update={
                            **asked,
                            "attempts": exc.attempts if isinstance(exc, ProviderError) else 0,
                            "latency_s": round(time.perf_counter() - started, 6),
                            "error": str(exc)[:BODY_SNIPPET],
                        }
                    )
                )
            raise
        result.call = result.call.model_copy(update={**asked, "latency_s": round(time.perf_counter() - started, 6)})
        if emit is not None:
            emit(result.call)
        return result

    def send(self, model: str, body: dict[str, Any]) -> ProviderResult:
        """POST ``body`` (in the provider's own protocol) with retries and return the normalized result.

        Raises:
            ProviderError: the last try failed, or a non-retryable 4xx came back; ``attempts`` says how many
                tries ran.
        """
        payload = json.dumps({**body, "model": model}).encode()
        tries = 0
        started = time.perf_counter()

        def attempt() -> ProviderResult:
            nonlocal tries
            tries += 1
            try:
                return self._attempt(model, payload, started, tries)
            except ProviderError as exc:
                exc.attempts = tries
                raise

        return self._retrying(attempt)

    def _attempt(self, model: str, payload: bytes, started: float, tries: int) -> ProviderResult:
        url = self.base_url + self.path
        try:
            resp = self._http.post(url, content=payload)
        except httpx.TransportError as exc:
            raise transport_failure(self.endpoint, model, url, exc) from None
        if resp.status_code >= 400:
            raise status_failure(self.endpoint, model, url, resp.status_code, resp.headers, resp.content)
        return parse_result(self.endpoint, self.spec.wire, model, url, resp.status_code, resp.content, started, tries)


def parse_result(
    endpoint: Endpoint, api: CallApi, model: str, url: str, status: int, raw: bytes, started: float, tries: int
) -> ProviderResult:
    """A 2xx body of wire API ``api``, read (:func:`~runner.gateway.protocols.reader_for`) into a call.

    Raises:
        ProviderError: the body is not a JSON object (``malformed``, retryable).
    """
    raw = endpoint.redact_bytes(raw)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        message = f"{url} answered {status} with a body that is not a JSON object"
        name = endpoint.spec.name
        raise ProviderError(message, kind="malformed", provider=name, model=model, status=status, retryable=True)
    reader = reader_for(api)
    reader.read_body(body)
    call = ModelCall(
        api=api,
        provider_api=api,
        requested_model=model,
        stream=False,
        latency_s=round(time.perf_counter() - started, 6),
        attempts=tries,
        status=status,
        outcome="ok",
        usage=reader.usage,
        returned_model=reader.returned_model,
        response=reader.reply(complete=True),
    )
    return ProviderResult(call=call, body=body, raw=raw)


class OpenAIClient(ProviderClient):
    """OpenAI's chat completions (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``)."""

    default_spec = PROVIDERS["openai"]


class AnthropicClient(ProviderClient):
    """Anthropic's Messages API (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``)."""

    default_spec = PROVIDERS["anthropic"]
