"""A base for test backends that answer a whole sample in-process, in ``run_sample``, with no container."""

from __future__ import annotations

from runner.contract import SampleOutput
from runner.sandbox.backend import Backend, SampleHandle, SampleSpec, SweepReport
from runner.sandbox.collect import AgentEnd


class InProcessBackend(Backend[SampleHandle]):
    """Subclasses override ``run_sample``; the per-phase methods are never reached, and say so if they are."""

    name = "in-process"
    isolates = True

    def create(self, spec: SampleSpec) -> SampleHandle:
        raise NotImplementedError("an in-process backend answers in run_sample")

    def run(self, handle: SampleHandle) -> AgentEnd:
        raise NotImplementedError("an in-process backend answers in run_sample")

    def collect(self, handle: SampleHandle, end: AgentEnd) -> SampleOutput:
        raise NotImplementedError("an in-process backend answers in run_sample")

    def remove(self, handle: SampleHandle) -> None:
        raise NotImplementedError("an in-process backend answers in run_sample")

    def sweep(
        self,
        run_id: str | None = None,
        *,
        attempt: str | None = None,
        board: str | None = None,
        orphans_only: bool = False,
    ) -> SweepReport:
        return SweepReport()

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        raise NotImplementedError
