"""The gateway's ledger: per-sample tokens, and what each sample's requests cost.

Every request of a sample goes through it in order: :meth:`Ledger.authenticate` (whose token), :meth:`Ledger.arrive`
(its number), :meth:`Ledger.reserve` (counted, and refused past a cap) and, once it ends, :meth:`Ledger.settle`,
which books the one :class:`~runner.call.ModelCall` the gateway made of it. ``settle`` is where a call's figures
are first known, and ``reserve`` where the next call can be refused on them: per-sample limits live there.

Thread-safe: the run's threads issue and revoke tokens while the gateway's event loop authenticates, reserves
and settles requests. Every operation holds one lock for a few dictionary operations only.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from typing import Literal

from runner import log
from runner.call import ModelCall
from runner.errors import GatewayError
from runner.gateway.model import Caps, ProviderErrorRecord, SampleUsage
from runner.prices import price, usd_text

_log = log.get(__name__)


def _digest(token: str) -> bytes:
    # Tokens are looked up by digest: the table never holds a usable token, and lookup timing reveals nothing.
    return hashlib.sha256(token.encode()).digest()


class CapRefusal(GatewayError):
    """A per-sample cap refused the request before it reached the provider.

    Attributes:
        limit: ``requests`` (the request cap, a 429 the caller may wait out) or ``token_limit`` (the sample's token
            limit, final for the sample).
    """

    def __init__(self, message: str, limit: Literal["requests", "token_limit", "cost_limit"]) -> None:
        self.limit = limit
        super().__init__(message)


class Ledger:
    """Per-sample bearer tokens and :class:`SampleUsage`."""

    def __init__(self, caps: Caps | None = None, candidate: str | None = None) -> None:
        """A ledger under ``caps``; ``candidate`` (``provider/model``) prices the calls against ``caps.max_usd``."""
        self.caps = caps or Caps()
        self.candidate = candidate
        self.spent_usd = 0.0
        """Dollars of every call booked so far, all samples together (counted only under ``caps.max_usd``)."""
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified whenever a forwarded request ends
        self._tokens: dict[bytes, str] = {}
        self._revoked: dict[bytes, str] = {}
        self._live: dict[str, bytes] = {}
        self._usage: dict[str, SampleUsage] = {}
        self._arrived: dict[str, int] = {}  # requests of each sample so far, the next one's number

    def issue(self, sample_id: str) -> str:
        """A fresh bearer token for ``sample_id``, starting a fresh :class:`SampleUsage`.

        Raises:
            GatewayError: the sample already holds a live token (revoke it first).
        """
        token = secrets.token_urlsafe(32)
        with self._lock:
            if sample_id in self._live:
                raise GatewayError(f"sample {sample_id!r} already holds a live gateway token")
            self._live[sample_id] = _digest(token)
            self._tokens[_digest(token)] = sample_id
            self._usage[sample_id] = SampleUsage(sample_id=sample_id)
            self._arrived[sample_id] = 0
        _log.info("token_issued", sample=sample_id)
        return token

    def revoke(self, sample_id: str, *, settle: float) -> None:
        """Refuse the sample's token from now on and wait up to ``settle`` s for its requests in flight.

        Idempotent. Raises ``KeyError`` for an unknown sample.
        """
        with self._lock:
            usage = self._usage[sample_id]
            digest = self._live.pop(sample_id, None)
            if digest is not None:
                del self._tokens[digest]
                self._revoked[digest] = sample_id
        with self._settled:
            self._settled.wait_for(lambda: usage.in_flight == 0, timeout=settle)
        if digest is not None:
            _log.info("token_revoked", sample=sample_id, in_flight=usage.in_flight)

    def usage(self, sample_id: str) -> SampleUsage:
        """A copy of the sample's usage so far. Raises ``KeyError`` for an unknown sample."""
        with self._lock:
            return self._usage[sample_id].model_copy(deep=True)

    def authenticate(self, token: str | None, bound: str | None, route: str) -> str | None:
        """The sample that ``token`` belongs to, or None (missing, unknown, revoked, or foreign to ``bound``)."""
        if not token:
            _log.warning("token_refused", reason="missing", route=route, listener_sample=bound)
            return None
        digest = _digest(token)
        with self._lock:
            sample_id = self._tokens.get(digest)
            revoked_for = self._revoked.get(digest)
        if sample_id is not None and (bound is None or bound == sample_id):
            return sample_id
        # Log a fingerprint, never the token: a confused agent might send anything here, even a real key.
        reason = "foreign" if sample_id is not None else "revoked" if revoked_for is not None else "unknown"
        _log.warning(
            "token_refused",
            reason=reason,
            route=route,
            token_sample=sample_id or revoked_for,
            listener_sample=bound,
            fingerprint=digest.hex()[:12],
        )
        return None

    def arrive(self, sample_id: str) -> int:
        """The number of an authenticated request among its sample's requests, from 0, in arrival order."""
        with self._lock:
            seq = self._arrived.get(sample_id, 0)
            self._arrived[sample_id] = seq + 1
            return seq

    def reserve(self, sample_id: str, *, counts: bool = True) -> SampleUsage:
        """Count a request as forwarded (``counts``: as a step) and in flight; the usage object to settle later.

        Raises:
            CapRefusal: a cap is reached; the refusal is counted in ``refused``.
        """
        # Check and count under one lock so concurrent requests cannot slip past a cap together.
        caps = self.caps
        with self._lock:
            usage = self._usage[sample_id]
            over = None
            limit: Literal["requests", "token_limit", "cost_limit"] = "requests"
            # A request that is not a step (count_tokens) costs no tokens: no cap refuses it.
            if not counts:
                pass
            elif caps.max_requests is not None and usage.requests >= caps.max_requests:
                over = f"request cap reached: {usage.requests} of {caps.max_requests} requests used"
            elif caps.max_tokens is not None and (used := usage.tokens.input_tokens + usage.tokens.output_tokens) >= (
                caps.max_tokens
            ):
                limit = "token_limit"
                over = (
                    f"the sample's token limit is reached: {used} of {caps.max_tokens} input and output tokens used "
                    "(--sample-token-limit); no further model calls are allowed for this sample, so write your "
                    "answer now"
                )
                usage.stopped_by = "token_limit"
            elif caps.max_usd is not None and self.spent_usd >= caps.max_usd:
                limit = "cost_limit"
                over = (
                    f"the run's cost limit is reached: {usd_text(self.spent_usd)} of {usd_text(caps.max_usd)} spent "
                    "(--run-cost-limit); no further model calls are allowed"
                )
                usage.stopped_by = "cost_limit"
            if over is None:
                usage.requests += 1 if counts else 0
                usage.in_flight += 1
                return usage
            usage.refused += 1
        _log.warning("cap_refused", sample=sample_id, reason=over, limit=limit)
        raise CapRefusal(over, limit)

    def settle(
        self,
        usage: SampleUsage,
        call: ModelCall,
        *,
        counted: bool,
        failure: ProviderErrorRecord | None = None,
    ) -> None:
        """Book a finished request on the usage it was reserved on (not a lookup: the sample may have been
        re-issued meanwhile): its tokens, time and model id, and its figures among the sample's calls (never its
        content). ``counted`` says whether it was reserved as a step; a request refused before it reached the
        provider is taken back out of ``requests``."""
        figures = call.figures()
        with self._settled:
            usage.in_flight -= 1
            if call.provider_api is None and counted:
                usage.requests -= 1
            usage.latency_s += call.latency_s if call.provider_api is not None else 0.0
            if call.usage is not None:
                usage.tokens = usage.tokens + call.usage
                if self.caps.max_usd is not None:
                    self.spent_usd += price(self.candidate, call.usage, call.started_at, call.returned_model).usd or 0
            if call.returned_model and call.returned_model not in usage.model_ids:
                usage.model_ids.append(call.returned_model)
            if failure is not None:
                usage.errors.append(failure)
            usage.calls.append(figures)
            self._settled.notify_all()
