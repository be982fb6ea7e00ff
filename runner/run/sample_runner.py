"""Where a run's samples run: the one interface the scheduler calls, and its implementation on this host.

The scheduler hands each sample's spec to the plan's :class:`SampleRunner` and gets back a :class:`RanSample`: the
output, the gateway's usage, the node and any tries lost before the kept one. Grading, judges and the journal stay
with the scheduler whichever runner it has:

- :class:`HostRunner` runs samples on this host through a sandbox backend, each linked to this host's gateway;
- :class:`runner.cluster.driver.RayRunner` runs them on a Ray cluster's nodes, each linked to its node's gateway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict

from runner.contract import SampleOutput
from runner.gateway.model import SampleUsage
from runner.run.journal import SampleAttempt
from runner.sandbox.backend import Backend, BackendFailed, SampleSpec, run_linked
from runner.transcript.storage import EncodedPart, TranscriptBuilder

if TYPE_CHECKING:
    from runner.gateway.server import Gateway


class RanSample(BaseModel):
    """One sample as it came back from wherever it ran."""

    # A transcript builder is the gateway's live object, handed over whole rather than validated.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True, arbitrary_types_allowed=True)

    output: SampleOutput
    """What the sandbox collected."""
    usage: SampleUsage | None = None
    """The agent's usage as the gateway counted it; ``None`` without a gateway."""
    node: str | None = None
    """The cluster node the kept try ran on; ``None`` on one machine."""
    engine: str | None = None
    """The Docker engine the kept try ran on, on its node (``<host>:<data root> (<engine ID>)``); ``None`` on one
    machine."""
    lost_tries: tuple[SampleAttempt, ...] = ()
    """Tries lost before the kept one (the journal's and record's ``attempts``)."""
    transcript: TranscriptBuilder | EncodedPart | None = None
    """The agent's model calls as the gateway captured them, here or encoded on a cluster node; ``None`` without a
    gateway (docs/trace.md)."""


class SampleRunner(Protocol):
    """Runs whole samples, each with its gateway when the run needs a model, and removes a run's sandboxes."""

    def run_sample(self, spec: SampleSpec) -> RanSample:
        """Run ``spec`` to its end; never raises for the sample's own failure."""
        ...

    def sweep(self, run_id: str, *, attempt: str | None = None) -> None:
        """Remove every sandbox resource of ``run_id`` wherever it runs (Ctrl-C, a tripped breaker), or only those
        of its attempt ``attempt`` (the ``ispm.attempt`` label: a hands-off stop)."""
        ...


class HostRunner:
    """Runs samples on this host through ``backend``, each linked to ``gateway`` (none: the agent needs no model)."""

    def __init__(self, backend: Backend[Any], gateway: Gateway | None = None, *, board: str | None = None) -> None:
        """A runner through ``backend``; the caller owns and closes both."""
        self.backend = backend
        self.gateway = gateway
        self.board = board
        """The board whose run this is, if any: labelled on every sandbox (``ispm.board``), and the only board's
        sandboxes :meth:`sweep` touches. Beside the run's spec, not in it: the record stays as it is."""

    def run_sample(self, spec: SampleSpec) -> RanSample:
        """Run ``spec`` through the backend, linked to the gateway when there is one; never raises for the
        sample's own failure.

        Raises:
            BackendFailed: the sample did not end ``ok`` and the backend's engine no longer answers: the fault is
                the host's, and the scheduler stops the run without journaling the sample.
        """
        output = run_linked(self.backend, spec.model_copy(update={"board": self.board}), self.gateway)
        if output.status != "ok":
            fault = self.backend.fault()
            if fault is not None:
                raise BackendFailed(
                    f"the {self.backend.name} backend failed under sample {spec.sample_id} ({output.status}: "
                    f"{output.error}): {fault}; resume the run once it is back"
                )
        # Read after the link closed: revoking the token waits for the sample's requests in flight.
        if self.gateway is None:
            return RanSample(output=output)
        return RanSample(
            output=output,
            usage=self.gateway.usage(spec.sample_id),
            transcript=self.gateway.transcript(spec.sample_id),
        )

    def sweep(self, run_id: str, *, attempt: str | None = None) -> None:
        """Remove the run's (or its attempt's) sandbox resources on this host's backend.

        Raises:
            SandboxError: the backend's engine failed.
        """
        self.backend.sweep(run_id, attempt=attempt, board=self.board)
