"""The agent-facing HTTP API: a Starlette app speaking chat completions, Responses, Messages and Gemini to agents.

Routes (base URLs ``http://127.0.0.1:8765/v1`` for OpenAI SDKs and ``http://127.0.0.1:8765`` for Anthropic's):

- ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages``: streamed when the body says
  ``"stream": true``. Every request goes to the run's candidate whatever model it names; the name is recorded.
- ``POST /v1/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse`` (and the same under
  ``/v1beta``), Gemini's API as the ``google-genai`` SDK calls it (base URL ``http://127.0.0.1:8765``): the model
  and the stream are named in the path. Any other Gemini method is a 404 in Google's error shape.
- ``POST /v1/messages/count_tokens``: passed to an Anthropic candidate; not a step, and free.
- ``GET /v1/models``: the candidate, in OpenAI's list shape, or Anthropic's when ``anthropic-version`` is sent, or
  Google's with ``x-goog-api-key`` (and always on ``GET /v1beta/models``); ``GET …/models/{model}`` describes the
  candidate in Google's shape, under the name asked for (the SDK's ``models.get``).
- ``GET /v1/responses`` (Responses over WebSocket, which Codex's built-in provider tries first): refused with 426
  Upgrade Required in OpenAI's error shape, as OpenAI answers where WebSockets are off, so the client falls back to
  ``POST /v1/responses`` on its first try (Codex 0.163.0: one attempt, 0.02 s; a 403, 404 or 405 costs it seven
  attempts and about 6.6 s). The refusal is booked on the sample's transcript.
- ``GET /healthz``.

The per-sample token is accepted as ``Authorization: Bearer``, as Anthropic's ``x-api-key`` or as Google's
``x-goog-api-key``. A body larger
than the limit is refused from its ``Content-Length`` before it is read (and counted while read when chunked).
Errors come in the shape of the route's API, so stock SDKs surface the message, with ``x-should-retry: false``
(the gateway already retried).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import anyio
import anyio.abc
import httpx
from httpx_sse import EventSource, SSEError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from runner import log
from runner.call import Body, CallApi, CallOutcome, ModelCall, StreamCut
from runner.gateway import policy
from runner.gateway.bridges import Bridge, StreamTranslator, bridge_for, native_api
from runner.gateway.ledger import CapRefusal, Ledger
from runner.gateway.model import Api, ProviderErrorRecord, ProviderSpec, SampleUsage
from runner.gateway.protocols import TranslationError, reader_for
from runner.gateway.protocols import gemini as gemini_wire
from runner.gateway.protocols.reply import count_of
from runner.gateway.providers import BODY_SNIPPET, ProviderError
from runner.gateway.upstream import Upstream
from runner.transcript.capture import Capture

_log = log.get(__name__)

BOUND_KEY = "ispm.bound_sample"
"""The ASGI scope key naming the sample a listener is bound to (set by the listener's wrapper)."""
_PASS_THROUGH_STATUSES = {400, 413, 422}  # the provider blames the request content: the agent should know
_FORWARDED_HEADERS = ("anthropic-beta",)  # passed on to an Anthropic provider (the API version is ours)
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    411: "invalid_request_error",
    413: "request_too_large",
    403: "permission_error",
    429: "rate_limit_error",
}
_ROUTES = (
    "POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, GET /v1/models, "
    "POST /v1beta/models/{model}:generateContent, POST /v1beta/models/{model}:streamGenerateContent?alt=sse"
)
_GEMINI_METHODS = {"generateContent": False, "streamGenerateContent": True}  # Gemini's method → whether it streams


@dataclass
class Upstreams:
    """What the app needs of the gateway: the ledger, the provider hop, and who the candidate is."""

    ledger: Ledger
    """Tokens and per-sample usage."""
    upstream: Upstream
    """The candidate's provider hop."""
    spec: ProviderSpec
    """The candidate's provider."""
    candidate: str
    """The candidate, ``provider/model``."""
    max_body_bytes: int
    """Requests with a larger body are refused (413)."""
    body_read_s: float
    """A request body still arriving after this many seconds is refused (408)."""
    capture: Capture | None = None
    """Where each call's content goes for the sample's transcript; ``None`` keeps none."""


@dataclass(slots=True)
class _Arrival:
    """An authenticated request: whose, its number among the sample's calls, when it came, and what came with it."""

    sample_id: str
    seq: int
    """Its number among the sample's requests, in arrival order."""
    started: float
    """When it arrived, on the performance counter (latencies are measured from here)."""
    at: datetime
    """When it arrived (UTC)."""
    headers: dict[str, str]
    """Its headers, as sent (the capture redacts them)."""
    token: str | None
    """The sample's token it came with: a secret no transcript may hold."""
    size: int = 0
    """Its body's length in bytes."""
    path_model: str | None = None
    """The model the path named (Gemini names it there, not in the body)."""
    path_stream: bool = False
    """Whether the path asked for a stream (Gemini's ``streamGenerateContent``)."""


def error_reply(api: Api | str, status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    """An error in the shape of ``api``'s SDKs, telling them not to retry on their own."""
    if api in ("messages", "count_tokens"):
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message, **extra},
        }
    elif api == "gemini":
        body = gemini_wire.error_body(status, message, **extra)
    else:
        body = {"error": {"message": message, "type": kind, "code": kind, "param": None, **extra}}
    return JSONResponse(body, status_code=status, headers={"x-should-retry": "false"})


def _token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return (request.headers.get("x-api-key") or request.headers.get("x-goog-api-key") or "").strip() or None


class _BodyRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


async def _read_body(request: Request, limit: int, seconds: float) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise _BodyRefused(
            413 if length.isdigit() else 400,
            "the request body is too large" if length.isdigit() else "a malformed Content-Length",
        )
    body = bytearray()
    with anyio.move_on_after(seconds) as deadline:  # an agent trickling its body must not hold a request open
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise _BodyRefused(413, "the request body is too large")
    if deadline.cancelled_caught:
        raise _BodyRefused(408, f"the request body did not arrive within {seconds:g} s")
    return bytes(body)


def _shape_problem(api: Api, body: Any) -> str | None:
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if api in ("chat", "messages") and not isinstance(body.get("messages"), list):
        return "the request needs a 'messages' list"
    if api == "responses" and not isinstance(body.get("input"), str | list):
        return "the request needs an 'input' string or list"
    if api == "gemini" and not isinstance(body.get("contents"), list):
        return "the request needs a 'contents' list"
    return None


def _forwarded_headers(request: Request, provider_api: str) -> dict[str, str]:
    if provider_api not in ("messages", "count_tokens"):
        return {}
    return {name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers}


def _provider_failure_reply(api: Api | str, exc: ProviderError) -> JSONResponse:
    status = 504 if exc.kind == "timeout" else 502
    if exc.status is not None and exc.status in _PASS_THROUGH_STATUSES:
        status = exc.status
    return error_reply(
        api,
        status,
        "provider_error",
        f"the candidate model failed: {exc}",
        provider_status=exc.status,
        attempts=exc.attempts,
    )


def _headers(request: Request) -> dict[str, str]:
    """The request's headers as one dict, names lower-cased, repeated names joined by ``, ``."""
    out: dict[str, str] = {}
    for raw_name, raw_value in request.scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def _call(arrival: _Arrival, api: CallApi, request: Body, **fields: Any) -> ModelCall:
    """The call ``arrival`` became: who asked, what, and (``fields``) what came of it."""
    content = request.content if request.encoding == "json" and isinstance(request.content, dict) else {}
    requested = arrival.path_model or content.get("model")
    return ModelCall(
        seq=arrival.seq,
        api=api,
        requested_model=requested if isinstance(requested, str) else None,
        stream=arrival.path_stream or bool(content.get("stream")),
        started_at=arrival.at,
        latency_s=round(time.perf_counter() - arrival.started, 6),
        request_headers=arrival.headers,
        request=request,
        **fields,
    )


def _book(
    upstreams: Upstreams,
    arrival: _Arrival,
    call: ModelCall,
    usage: SampleUsage | None,
    *,
    counted: bool = True,
    failure: ProviderErrorRecord | None = None,
) -> None:
    """The one place a finished call goes: the ledger books its figures on ``usage`` (when it reserved one: a request
    refused before that is not the sample's), and the capture keeps all of it for the sample's transcript."""
    if usage is not None:
        upstreams.ledger.settle(usage, call, counted=counted, failure=failure)
    if upstreams.capture is not None:
        upstreams.capture.submit(arrival.sample_id, call, (arrival.token,) if arrival.token else ())


def _json_body(body: Any, size: int) -> Body:
    """A request body that parsed, as the capture keeps it."""
    return Body(encoding="json", content=body, size=size)


def build_app(upstreams: Upstreams) -> Starlette:
    """The agent-facing app over ``upstreams``."""

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def models(request: Request) -> Response:
        # Gemini's paths are the others (/v1beta/models, models/{model}); on /v1/models its key header says it.
        gemini = request.url.path != "/v1/models" or "x-goog-api-key" in request.headers
        api: Api = "messages" if "anthropic-version" in request.headers else "gemini" if gemini else "chat"
        if upstreams.ledger.authenticate(_token(request), request.scope.get(BOUND_KEY), request.url.path) is None:
            return error_reply(api, 401, "authentication_error", "missing, unknown, revoked or foreign gateway token")
        model = upstreams.upstream.model
        if api == "gemini":  # Google's Model: the candidate, under whatever name was asked for (models.get)
            asked = str(request.path_params.get("target", model)).removeprefix("models/")
            if not asked or ":" in asked:
                why = f"no route GET {request.url.path[:200]}; use GET /v1beta/models or /v1beta/models/{{model}}"
                return error_reply(api, 404, "not_found", why)
            described = {
                "name": f"models/{asked}",
                "displayName": model,
                "supportedGenerationMethods": list(_GEMINI_METHODS),
            }
            return JSONResponse(described if "target" in request.path_params else {"models": [described]})
        if api == "messages":
            listing = {"type": "model", "id": model, "display_name": model, "created_at": "1970-01-01T00:00:00Z"}
            return JSONResponse({"data": [listing], "has_more": False, "first_id": model, "last_id": model})
        entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": upstreams.spec.name}
        return JSONResponse({"object": "list", "data": [entry]})

    def model_route(api: Api) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                if api == "gemini":
                    return await _gemini_request(upstreams, request)
                return await _model_request(upstreams, request, api)
            except Exception:  # a bug must cost one request, not the listener
                _log.exception("gateway_internal_error", path=request.url.path)
                return error_reply(api, 500, "internal_error", "the gateway failed on this request")

        return endpoint

    async def responses_upgrade(request: Request) -> Response:
        return await _refuse_upgrade(upstreams, request)

    async def count_tokens(request: Request) -> Response:
        try:
            return await _count_tokens(upstreams, request)
        except Exception:
            _log.exception("gateway_internal_error", path=request.url.path)
            return error_reply("messages", 500, "internal_error", "the gateway failed on this request")

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_reply(
            _api_of(request), 404, "not_found", f"no route {request.method} {request.url.path[:200]}; use {_ROUTES}"
        )

    async def not_allowed(request: Request, exc: Exception) -> Response:
        message = f"{request.method} is not allowed here; use {_ROUTES}"
        return error_reply(_api_of(request), 405, "invalid_request_error", message)

    app = Starlette(
        routes=[
            Route("/healthz", health, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", model_route("chat"), methods=["POST"]),
            Route("/v1/responses", model_route("responses"), methods=["POST"]),
            Route("/v1/responses", responses_upgrade, methods=["GET"]),
            Route("/v1/messages", model_route("messages"), methods=["POST"]),
            Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route("/v1beta/models", models, methods=["GET"]),
            Route("/v1/models/{target:path}", model_route("gemini"), methods=["POST"]),
            Route("/v1beta/models/{target:path}", model_route("gemini"), methods=["POST"]),
            Route("/v1/models/{target:path}", models, methods=["GET"]),
            Route("/v1beta/models/{target:path}", models, methods=["GET"]),
        ],
        exception_handlers={404: not_found, 405: not_allowed},
    )
    # A path one slash off is answered 404 naming the routes, not redirected: a 307 is no answer an SDK reads (and
    # GET /v1beta/models would be sent on to the Gemini route's "/v1beta/models/").
    app.router.redirect_slashes = False
    return app


async def _refuse_upgrade(upstreams: Upstreams, request: Request) -> Response:
    """``GET /v1/responses``: Responses over WebSocket is not spoken here. 426, so that the client falls back to
    HTTP at once, in OpenAI's error shape, naming what was refused; booked on the sample when its token is good."""
    started = time.perf_counter()
    upgrade = request.headers.get("upgrade", "").strip().lower()[:40]
    what = f"an upgrade to {upgrade!r}" if upgrade else "GET without a WebSocket upgrade"
    why = f"Responses over WebSocket is not supported by the ISPM gateway ({what}); use POST /v1/responses"
    reply = error_reply("responses", 426, "invalid_request_error", why)
    reply.headers["connection"] = "close"  # the client sent no body, but may have meant to speak another protocol
    token = _token(request)
    sample_id = upstreams.ledger.authenticate(token, request.scope.get(BOUND_KEY), request.url.path)
    if sample_id is None:
        return error_reply(
            "responses", 401, "authentication_error", "missing, unknown, revoked or foreign gateway token"
        )
    at = datetime.now(UTC) - timedelta(seconds=time.perf_counter() - started)
    arrival = _Arrival(sample_id, upstreams.ledger.arrive(sample_id), started, at, _headers(request), token)
    _refused(upstreams, "responses", arrival, reply, Body(encoding="omitted", size=0, note=why), why)
    _log.warning("request_refused", sample=sample_id, api="responses", reason=why)
    return reply


async def _authenticated_body(
    upstreams: Upstreams, request: Request, api: Api | Literal["count_tokens"], started: float
) -> tuple[_Arrival, dict[str, Any]] | Response:
    """The sample and the JSON body, or the refusal to send (captured, once the sample is known)."""
    token = _token(request)
    sample_id = upstreams.ledger.authenticate(token, request.scope.get(BOUND_KEY), request.url.path)
    if sample_id is None:
        return error_reply(api, 401, "authentication_error", "missing, unknown, revoked or foreign gateway token")
    at = datetime.now(UTC) - timedelta(seconds=time.perf_counter() - started)
    arrival = _Arrival(sample_id, upstreams.ledger.arrive(sample_id), started, at, _headers(request), token)
    try:
        raw = await _read_body(request, upstreams.max_body_bytes, upstreams.body_read_s)
    except _BodyRefused as exc:
        refusal = error_reply(api, exc.status, "invalid_request_error", str(exc))
        refusal.headers["connection"] = "close"  # the unread rest of the body cannot start another request
        declared = request.headers.get("content-length", "")
        arrival.size = int(declared) if declared.isdigit() else 0
        omitted = Body(encoding="omitted", size=arrival.size, note=str(exc))
        _refused(upstreams, api, arrival, refusal, omitted, str(exc))
        return refusal
    arrival.size = len(raw)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
        why = "the request body is not JSON"
        refusal = error_reply(api, 400, "invalid_request_error", why)
        _refused(upstreams, api, arrival, refusal, Body.of_bytes(raw), why)
        return refusal
    problem = _shape_problem("messages" if api == "count_tokens" else api, body)
    if problem is not None:
        refusal = error_reply(api, 400, "invalid_request_error", problem)
        _refused(upstreams, api, arrival, refusal, _json_body(body, arrival.size), problem)
        return refusal
    return arrival, body


def _refused(
    upstreams: Upstreams,
    api: CallApi,
    arrival: _Arrival,
    refusal: Response,
    request: Body,
    why: str,
    usage: SampleUsage | None = None,
) -> None:
    """Book a request the gateway refused before any provider call, and ``why`` (on ``usage`` when it was reserved:
    a request refused before that is not one of the sample's)."""
    call = _call(
        arrival,
        api,
        request,
        provider_api=None,
        status=refusal.status_code,
        outcome="refused",
        error=why[:BODY_SNIPPET],
        error_body=Body.of_bytes(bytes(refusal.body)),
    )
    _book(upstreams, arrival, call, usage)


def _api_of(request: Request) -> Api:
    """The API whose error shape a request that matched no route gets: Gemini's for its paths and its key header."""
    path = request.url.path
    if path.startswith("/v1beta/") or ":" in path or "x-goog-api-key" in request.headers:
        return "gemini"
    return "messages" if "anthropic-version" in request.headers else "chat"


async def _gemini_request(upstreams: Upstreams, request: Request) -> Response:
    """A Gemini call: the path names the model and the method (``models/{model}:{method}``)."""
    model, _, method = str(request.path_params.get("target", "")).rpartition(":")
    stream = _GEMINI_METHODS.get(method)
    if not model or stream is None:
        served = ", ".join(_GEMINI_METHODS)
        why = f"the gateway serves Gemini's {served} only, not {method[:100] or request.url.path[:200]!r}"
        return error_reply("gemini", 404, "not_found", why)
    if stream and request.query_params.get("alt") != "sse":
        why = "streamGenerateContent needs ?alt=sse: the gateway streams server-sent events only"
        return error_reply("gemini", 400, "invalid_request_error", why)
    return await _model_request(upstreams, request, "gemini", model=model.removeprefix("models/"), stream=stream)


async def _model_request(
    upstreams: Upstreams, request: Request, api: Api, *, model: str | None = None, stream: bool = False
) -> Response:
    """One model call; ``model`` and ``stream`` are what the path said (Gemini's), else the body says them."""
    started = time.perf_counter()
    checked = await _authenticated_body(upstreams, request, api, started)
    if isinstance(checked, Response):
        return checked
    arrival, body = checked
    arrival.path_model, arrival.path_stream = model, stream
    sent = _json_body(body, arrival.size)
    refused = policy.refusal(api, body)
    if refused is not None:
        _log.warning("request_refused", sample=arrival.sample_id, api=api, reason=refused)
        reply = error_reply(api, 400, "invalid_request_error", refused)
        _refused(upstreams, api, arrival, reply, sent, refused)
        return reply
    try:
        usage = upstreams.ledger.reserve(arrival.sample_id)
    except CapRefusal as exc:
        # A token or cost limit is final: a 403, which no SDK retries (they retry 408, 409, 429 and 5xx).
        status, code = (403, f"ispm_{exc.limit}") if exc.limit != "requests" else (429, "ispm_cap_exceeded")
        reply = error_reply(api, status, code, str(exc))
        _refused(upstreams, api, arrival, reply, sent, str(exc))
        return reply
    provider_api = native_api(api, upstreams.spec)
    try:
        bridge = bridge_for(api, upstreams.spec)
        native = bridge.request(body, upstreams.upstream.model) if bridge else dict(body)
    except (TranslationError, LookupError) as exc:
        reply = error_reply(api, 400, "invalid_request_error", str(exc))
        _refused(upstreams, api, arrival, reply, sent, str(exc), usage)
        return reply
    headers = _forwarded_headers(request, provider_api)
    if body.get("stream") or stream:
        return await _open_relay(upstreams, usage, api, provider_api, bridge, body, native, headers, arrival)
    try:
        result = await upstreams.upstream.complete(provider_api, native, headers)
    except ProviderError as exc:
        return _settle_failure(upstreams, usage, api, sent, provider_api, arrival, exc)
    answered = result.call  # as the provider hop read it: tries, usage, model id, the reply
    call = _call(
        arrival,
        api,
        sent,
        provider_api=provider_api,
        status=200,
        outcome="ok",
        attempts=answered.attempts,
        usage=answered.usage,
        returned_model=answered.returned_model,
        response=answered.response,
    )
    _book(upstreams, arrival, call, usage)
    if bridge is None:
        return Response(result.raw, media_type="application/json")  # the provider's bytes, untouched
    try:
        return JSONResponse(bridge.reply(result.body, body))
    except TranslationError as exc:  # the provider's reply, not the agent's request, is at fault
        return error_reply(api, 502, "provider_error", f"the candidate's reply cannot be given in this API: {exc}")


def _settle_failure(
    upstreams: Upstreams,
    usage: SampleUsage,
    api: CallApi,
    sent: Body,
    provider_api: CallApi,
    arrival: _Arrival,
    exc: ProviderError,
) -> JSONResponse:
    """Book a provider failure and return the agent's reply to it."""
    failure = exc.record()
    _log.warning("provider_failed", sample=usage.sample_id, **failure.model_dump(exclude={"at", "message"}))
    reply = _provider_failure_reply(api, exc)
    call = _call(
        arrival,
        api,
        sent,
        provider_api=provider_api,
        status=reply.status_code,
        outcome="provider_error",
        attempts=exc.attempts,
        error=failure.message,
        error_body=Body.of_bytes(bytes(reply.body)),
    )
    _book(upstreams, arrival, call, usage, counted=api != "count_tokens", failure=failure)
    return reply


async def _count_tokens(upstreams: Upstreams, request: Request) -> Response:
    started = time.perf_counter()
    checked = await _authenticated_body(upstreams, request, "count_tokens", started)
    if isinstance(checked, Response):
        return checked
    arrival, body = checked
    sent = _json_body(body, arrival.size)
    if upstreams.spec.wire != "messages":
        message = f"count_tokens needs an Anthropic candidate; the candidate is {upstreams.candidate}"
        reply = error_reply("count_tokens", 404, "not_found", message)
        _refused(upstreams, "count_tokens", arrival, reply, sent, message)
        return reply
    usage = upstreams.ledger.reserve(arrival.sample_id, counts=False)
    try:
        status, raw = await upstreams.upstream.count_tokens(body, _forwarded_headers(request, "count_tokens"))
    except ProviderError as exc:
        return _settle_failure(upstreams, usage, "count_tokens", sent, "count_tokens", arrival, exc)
    answered = status < 400
    reader = reader_for("count_tokens")
    if answered and (parsed := _json_object(raw)) is not None:
        reader.read_body(parsed)
    call = _call(
        arrival,
        "count_tokens",
        sent,
        provider_api="count_tokens",
        status=status,
        outcome="ok" if answered else "provider_error",
        attempts=1,
        error=None if answered else raw.decode("utf-8", "replace")[:BODY_SNIPPET],
        error_body=None if answered else Body.of_bytes(raw),
        returned_model=reader.returned_model,
        response=reader.reply(complete=True) if answered else None,
    )
    _book(upstreams, arrival, call, usage, counted=False)
    return Response(raw, status_code=status, media_type="application/json")


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


# -- streams -----------------------------------------------------------------------------------------------


def encode_event(api: Api, event: str, data: str) -> bytes:
    """One server-sent event as ``api`` frames it: chat completions sends only ``data:`` lines."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    if api == "chat" or not event:
        return (lines + "\n").encode()
    return (f"event: {event}\n" + lines + "\n").encode()


def _stream_error(api: Api, message: str, sequence: int) -> bytes:
    if api == "gemini":  # the SDK raises the error of an event that is {"error": ...}
        return encode_event(api, "", json.dumps(gemini_wire.error_body(500, message)))
    if api == "messages":
        payload: dict[str, Any] = {"type": "error", "error": {"type": "api_error", "message": message}}
        return encode_event(api, "error", json.dumps(payload))
    if api == "responses":
        payload = {
            "type": "error",
            "code": "provider_error",
            "message": message,
            "param": None,
            "sequence_number": sequence,
        }
        return encode_event(api, "error", json.dumps(payload))
    return encode_event(
        api, "", json.dumps({"error": {"message": message, "type": "provider_error", "code": None, "param": None}})
    )


async def _open_relay(
    upstreams: Upstreams,
    usage: SampleUsage,
    api: Api,
    provider_api: Api,
    bridge: Bridge | None,
    body: dict[str, Any],
    native: dict[str, Any],
    headers: dict[str, str],
    arrival: _Arrival,
) -> Response:
    if provider_api != "gemini":  # Gemini streams by its path, and refuses fields it does not know
        native["stream"] = True
    if provider_api == "chat":  # usage comes only when asked for; the agent's own choice is honoured below
        native["stream_options"] = {**(native.get("stream_options") or {}), "include_usage": True}
    try:
        resp, attempts = await upstreams.upstream.open_stream(provider_api, native, headers)
    except ProviderError as exc:
        return _settle_failure(upstreams, usage, api, _json_body(body, arrival.size), provider_api, arrival, exc)
    translator = bridge.stream(body, upstreams.upstream.model) if bridge else None
    return _Relay(upstreams, usage, api, provider_api, translator, body, resp, attempts, arrival)


class _Relay(Response):
    """A streamed reply: provider events in, agent events out, accounted for however the stream ends.

    Each provider event is parsed once, sent on (translated when the APIs differ), then read by the provider API's
    reader (:mod:`runner.gateway.protocols`), which keeps both the figures and the reply: the agent never waits on
    the reading. The agent's hang-up is watched for while waiting on the provider, so a cut stream is booked at once.
    """

    def __init__(
        self,
        upstreams: Upstreams,
        usage: SampleUsage,
        api: Api,
        provider_api: Api,
        translator: StreamTranslator | None,
        body: dict[str, Any],
        resp: httpx.Response,
        attempts: int,
        arrival: _Arrival,
    ) -> None:
        super().__init__(media_type="text/event-stream")
        self.upstreams, self.usage, self.api, self.provider_api = upstreams, usage, api, provider_api
        self.translator, self.request_body, self.resp, self.attempts, self.arrival = (
            translator,
            body,
            resp,
            attempts,
            arrival,
        )
        self.reader = reader_for(provider_api)
        self.ttft: float | None = None
        self.agent_gone = False
        self._group: anyio.abc.TaskGroup
        self.problem: str | None = None  # why the provider's stream is unusable, if it is
        self.sequence = 0
        opts = body.get("stream_options")  # the agent's request
        self.agent_wants_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            async with anyio.create_task_group() as group:
                self._group = group

                async def watch_hangup() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    self.agent_gone = True
                    group.cancel_scope.cancel()

                group.start_soon(watch_hangup)
                await self._pump(send)
                group.cancel_scope.cancel()
            if not self.agent_gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the agent's connection broke while we wrote
            self.agent_gone = True
        finally:
            self._settle()
            with anyio.CancelScope(shield=True):
                await self.resp.aclose()

    async def _pump(self, send: Send) -> None:
        async def emit(chunk: bytes) -> None:
            if self.agent_gone or not chunk:
                return
            try:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except OSError:  # the agent's connection broke: stop reading the provider too
                self.agent_gone = True
                self._group.cancel_scope.cancel()

        endpoint = self.upstreams.upstream.endpoint
        try:
            async for sse in EventSource(self.resp).aiter_sse():
                text = endpoint.redact(sse.data)
                if self.provider_api == "chat" and text.strip() == "[DONE]":
                    continue  # read on to the body's end, so the provider connection can be kept alive
                try:
                    data = json.loads(text)
                except (ValueError, RecursionError):
                    self.problem = f"the provider sent an event that is not JSON: {text[:200]!r}"
                    break
                if not isinstance(data, dict):
                    continue
                event = "" if sse.event == "message" else sse.event
                self.sequence = max(self.sequence, count_of(data.get("sequence_number")) + 1)
                arrived = time.perf_counter() if self.ttft is None else 0.0
                try:
                    outgoing = self._outgoing(event, data, text)
                except TranslationError as exc:
                    self.problem = f"the candidate's stream cannot be given in this API: {exc}"
                    self._read(event, data, arrived)
                    break
                try:
                    if outgoing:
                        await emit(b"".join(outgoing))  # one write for everything one provider event became
                finally:
                    self._read(event, data, arrived)  # after the write: the agent never waits on the reading
                if self.problem is not None:
                    break
        except (httpx.TransportError, SSEError) as exc:
            self.problem = f"the provider's stream broke: {type(exc.__cause__ or exc).__name__}"
        if self.problem is None and self.reader.error is not None:
            self.problem = f"the provider reported an error in its stream: {self.reader.error}"
        if self.problem is None and not self.reader.finished:
            self.problem = "the provider's stream ended before its final event"
        if self.translator is not None and self.problem is None:
            await emit(b"".join(encode_event(self.api, name, json.dumps(out)) for name, out in self.translator.close()))
        if self.problem is not None:
            await emit(_stream_error(self.api, self.problem, self.sequence))
        elif self.api == "chat":
            await emit(b"data: [DONE]\n\n")

    def _read(self, event: str, data: dict[str, Any], arrived: float) -> None:
        """Read one relayed event: the time to first token when it is the first to carry output."""
        try:
            output = self.reader.feed(event, data)
        except Exception as exc:  # a reader's bug must cost this stream, not the listener: say so, and stop
            _log.exception("stream_unreadable", sample=self.arrival.sample_id, api=self.provider_api)
            self.problem = f"the gateway could not read the provider's stream: {type(exc).__name__}"
            return
        if output and self.ttft is None:
            self.ttft = round(arrived - self.arrival.started, 6)

    def _outgoing(self, event: str, data: dict[str, Any], text: str) -> list[bytes]:
        if self.translator is None:
            if self.api == "chat" and not self.agent_wants_usage and not data.get("choices") and data.get("usage"):
                return []  # the usage chunk the gateway asked for, not the agent
            return [encode_event(self.api, event, text)]
        return [encode_event(self.api, name, json.dumps(out)) for name, out in self.translator.feed(event, data)]

    def _settle(self) -> None:
        reader = self.reader
        outcome: CallOutcome = "ok"
        error = None
        failure: ProviderErrorRecord | None = None
        cut: StreamCut | None = None
        if self.agent_gone and not reader.finished:
            outcome, error = "agent_disconnected", "the agent closed the stream before its end"
            cut = StreamCut(by="caller", reason=error, events_received=reader.events)
        elif self.problem is not None:
            outcome, error = "stream_cut", self.problem
            cut = StreamCut(by="provider", reason=error, events_received=reader.events)
            failure = ProviderError(
                self.problem,
                kind="stream",
                provider=self.upstreams.spec.name,
                model=self.upstreams.upstream.model,
                status=200,
                attempts=self.attempts,
            ).record()
        call = _call(
            self.arrival,
            self.api,
            _json_body(self.request_body, self.arrival.size),
            provider_api=self.provider_api,
            status=200,
            outcome=outcome,
            attempts=self.attempts,
            ttft_s=self.ttft,
            error=error,
            usage=reader.usage,
            returned_model=reader.returned_model,
            response=reader.reply(complete=outcome == "ok"),
            cut=cut,
        )
        _book(self.upstreams, self.arrival, call, self.usage, failure=failure)
