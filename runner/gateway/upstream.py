"""The gateway's hop to the candidate's provider: async httpx on aiohttp's transport, with the judges' retry policy.

httpx is the API the rest of the gateway uses; the bytes move through aiohttp (``httpx-aiohttp``), whose C
parser and connection pool cost about a fifth less CPU per stream event than httpcore's (docs/gateway.md, Speed).

A non-streamed call is retried as the judges' calls are (429, 5xx, timeouts, broken connections, a body that
is not JSON). A streamed call is retried only until the provider's response head arrives: after that, bytes
may already be on their way to the agent, and a retry would show it a second, different answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import httpx
import tenacity
from httpx_aiohttp import AiohttpTransport

from runner.gateway.model import Api, ClientSettings, ProviderResult
from runner.gateway.providers import (
    GEMINI_PATHS,
    PATHS,
    Endpoint,
    ProviderError,
    RetryPolicy,
    httpx_limits,
    httpx_timeout,
    parse_result,
    ssl_context,
    status_failure,
    transport_failure,
)

T = TypeVar("T")
_ERROR_BODY_BYTES = 64 * 1024  # what is read of a failed stream's body: enough for any provider's error JSON


class Upstream:
    """One provider endpoint and model, called from the gateway's event loop."""

    def __init__(
        self,
        endpoint: Endpoint,
        model: str,
        settings: ClientSettings,
        *,
        sleep: Callable[[float], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``sleep`` replaces the waits between retries (tests record them and do not wait)."""
        self.endpoint = endpoint
        self.model = model
        self.settings = settings
        self._policy = RetryPolicy(settings, endpoint.spec.name)
        self._sleep = sleep
        # Parsed once: httpx's pure-Python URL parser was a tenth of each streamed request's set-up CPU.
        self._urls = {name: httpx.URL(endpoint.base_url + path) for name, path in PATHS.items()}
        # The key rides on the client, set once: no request-building local ever holds it.
        self._http = self._client(endpoint.auth_headers(), transport)
        # Gemini's own API takes the key in its own header, and only that one (a Bearer there means OAuth).
        self._gemini = self._client(endpoint.gemini_headers(), transport) if endpoint.spec.gemini else None
        quoted = quote(model, safe="/")
        self._gemini_urls = {
            stream: httpx.URL(endpoint.gemini_base + path.format(model=quoted)) for stream, path in GEMINI_PATHS.items()
        }

    def _client(self, auth: dict[str, str], transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
        settings = self.settings
        return httpx.AsyncClient(
            timeout=httpx_timeout(settings),
            limits=httpx_limits(settings),
            headers={"content-type": "application/json", **auth},
            transport=transport or AiohttpTransport(verify=ssl_context(), limits=httpx_limits(settings)),
            verify=ssl_context(),
        )

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self._http.aclose()
        if self._gemini is not None:
            await self._gemini.aclose()

    async def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    def _retrying(self) -> tenacity.AsyncRetrying:
        return tenacity.AsyncRetrying(sleep=self._wait, **self._policy.arguments())

    def _request(self, path: str, body: dict[str, Any], headers: dict[str, str], stream: bool = False) -> httpx.Request:
        if path == "gemini" and self._gemini is not None:  # the model and the stream are in the URL, not the body
            payload = json.dumps(body).encode()
            return self._gemini.build_request("POST", self._gemini_urls[stream], content=payload, headers=headers)
        payload = json.dumps({**body, "model": self.model}).encode()
        return self._http.build_request("POST", self._urls[path], content=payload, headers=headers)

    async def complete(self, api: Api, body: dict[str, Any], headers: dict[str, str]) -> ProviderResult:
        """POST a non-streamed ``body`` of ``api`` (model replaced) with retries; a malformed body is retried too.

        Raises:
            ProviderError: the last try failed, or a non-retryable 4xx came back.
        """
        started = time.perf_counter()

        def accept(resp: httpx.Response, tries: int) -> ProviderResult:
            url = str(resp.request.url)
            return parse_result(self.endpoint, api, self.model, url, resp.status_code, resp.content, started, tries)

        return (await self._send(api, body, headers, stream=False, accept=accept))[0]

    async def count_tokens(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        """Anthropic's free token count, one try: ``(status, body bytes)``, the key redacted.

        Raises:
            ProviderError: the provider could not be reached.
        """
        request = self._request("count_tokens", body, headers)
        try:
            resp = await self._http.send(request)
        except httpx.TransportError as exc:
            raise transport_failure(self.endpoint, self.model, str(request.url), unmapped(exc)) from None
        return resp.status_code, self.endpoint.redact_bytes(resp.content)

    async def open_stream(self, api: Api, body: dict[str, Any], headers: dict[str, str]) -> tuple[httpx.Response, int]:
        """POST a streamed ``body``; the open 2xx response (the caller closes it) and the tries it took.

        Raises:
            ProviderError: every try failed before a 2xx head arrived, or a non-retryable 4xx came back.
        """
        return await self._send(api, body, headers, stream=True, accept=lambda resp, tries: resp)

    async def _send(
        self,
        api: Api,
        body: dict[str, Any],
        headers: dict[str, str],
        *,
        stream: bool,
        accept: Callable[[httpx.Response, int], T],
    ) -> tuple[T, int]:
        """One call with retries: ``accept`` turns a 2xx response into the result (raising to retry)."""
        tries = 0
        async for attempt in self._retrying():
            with attempt:
                tries += 1
                request = self._request(api, body, headers, stream)
                client = self._gemini if api == "gemini" and self._gemini is not None else self._http
                try:
                    resp = await client.send(request, stream=stream)
                except httpx.TransportError as exc:
                    failure = transport_failure(self.endpoint, self.model, str(request.url), unmapped(exc))
                    raise self._tried(failure, tries) from None
                if resp.status_code >= 400:
                    raw = await _error_body(resp) if stream else resp.content
                    url = str(request.url)
                    raise self._tried(
                        status_failure(self.endpoint, self.model, url, resp.status_code, resp.headers, raw), tries
                    )
                try:
                    return accept(resp, tries), tries
                except ProviderError as exc:
                    raise self._tried(exc, tries) from None
        raise AssertionError("unreachable: tenacity reraises the last failure")  # pragma: no cover

    @staticmethod
    def _tried(exc: ProviderError, tries: int) -> ProviderError:
        exc.attempts = tries
        return exc


def unmapped(exc: httpx.TransportError) -> httpx.TransportError:
    """``exc`` with its true kind: httpx-aiohttp calls every broken or refused connection a ``ConnectTimeout``.

    Only aiohttp's own timeouts are timeouts; anything else is a connection error, named after aiohttp's exception.
    """
    cause = exc.__cause__
    timed_out = isinstance(cause, aiohttp.ServerTimeoutError)
    if isinstance(exc, httpx.TimeoutException) and isinstance(cause, aiohttp.ClientError) and not timed_out:
        return httpx.ConnectError(f"{type(cause).__name__}: {cause}")
    return exc


async def _error_body(resp: httpx.Response) -> bytes:
    """A failed stream's body, bounded, and the response closed."""
    raw = bytearray()
    try:
        async for chunk in resp.aiter_raw():
            raw += chunk
            if len(raw) >= _ERROR_BODY_BYTES:
                break
    except httpx.TransportError:
        pass
    finally:
        await resp.aclose()
    return bytes(raw)
