"""Preflight: one minimal request per model alias, recording the model id each provider returns.

The contract records the returned ids once per run, at preflight. Problems are gathered, not raised one at a
time: a missing key or an unknown alias is found for every model before any request is spent, and every
unreachable endpoint is reported together, so one fix-up round is enough.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from runner import log
from runner.errors import GatewayError
from runner.gateway.model import ClientSettings
from runner.gateway.providers import ProviderClient, ProviderError, client_for

_log = log.get(__name__)

#: A failed preflight should say so soon, not after a long-reply read timeout and five tries.
PREFLIGHT_SETTINGS = ClientSettings(read_timeout=60.0, max_attempts=3, max_elapsed=120.0)

_PROBE = {"messages": [{"role": "user", "content": "Reply with the word OK."}], "max_completion_tokens": 16}


class ResolvedModel(BaseModel):
    """A model alias and the model id its provider answered with."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    alias: str
    """The reference as configured, ``provider/model``."""
    provider: str
    """The provider part of the alias."""
    requested_model: str
    """The model name sent to the provider."""
    returned_model: str | None
    """The model id the provider returned on the wire; None if the reply carried none."""
    base_url: str
    """The endpoint that answered (never holds a key)."""
    latency_s: float
    """Round trip of the probe, retries included."""
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the probe was answered (UTC)."""


class PreflightError(GatewayError):
    """One or more models failed preflight; ``problems`` lists one line per failure."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("preflight failed:\n" + "\n".join(f"  - {p}" for p in problems))


def preflight(models: list[str], settings: ClientSettings | None = None) -> list[ResolvedModel]:
    """Probe each model once (duplicates once in all) and return one :class:`ResolvedModel` per entry.

    Raises:
        PreflightError: a key is missing (the message names the variable), an alias is unknown, or an
            endpoint is unreachable or refuses the probe.
    """
    clients: dict[str, tuple[ProviderClient, str]] = {}
    problems: list[str] = []
    try:
        for alias in dict.fromkeys(models):
            try:
                clients[alias] = client_for(alias, settings or PREFLIGHT_SETTINGS)
            except GatewayError as exc:  # UnknownProvider, MissingCredential, BadEndpoint
                problems.append(str(exc))
        if problems:
            raise PreflightError(problems)
        resolved: dict[str, ResolvedModel] = {}
        for alias, (client, model) in clients.items():
            try:
                result = client.chat(model, _PROBE)
            except ProviderError as exc:
                problems.append(_explain(alias, client, exc))
                continue
            resolved[alias] = ResolvedModel(
                alias=alias,
                provider=client.provider,
                requested_model=model,
                returned_model=result.call.returned_model,
                base_url=client.base_url,
                latency_s=result.call.latency_s,
            )
            _log.info("preflight_resolved", alias=alias, returned_model=result.call.returned_model)
        if problems:
            raise PreflightError(problems)
        return [resolved[alias] for alias in models]
    finally:
        for client, _ in clients.values():
            client.close()


def _explain(alias: str, client: ProviderClient, exc: ProviderError) -> str:
    if exc.kind in ("connection", "timeout"):
        return f"{alias}: cannot reach {client.base_url} ({exc.kind} after {exc.attempts} attempt(s))"
    if exc.status in (401, 403):
        where = f"the key in {client.key_env}" if client.key_env else "the request (no key is set)"
        return f"{alias}: {client.base_url} rejected {where} (HTTP {exc.status})"
    if exc.status == 404:
        return f"{alias}: {client.base_url} does not know model {exc.model!r} (HTTP 404)"
    return f"{alias}: {exc}"
