"""What crosses the wire between the driver and a node: expectations, a node's check, one sample's result.

Nothing here holds a provider key: a node's gateway reads its keys from the node's own environment.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runner import __version__
from runner.contract import SampleOutput
from runner.errors import IspmError
from runner.gateway.model import SampleUsage
from runner.run.digests import current_digests
from runner.transcript.storage import EncodedPart


class ClusterError(IspmError):
    """The cluster cannot run this run: unreachable, no sandbox node, or every sandbox node refused.

    Attributes:
        problems: every reason, one line each (a refused node names itself).
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        super().__init__(message + "".join(f"\n  - {p}" for p in self.problems))


class NodeRefused(IspmError):
    """A sample reached a node that has not passed its checks for this run attempt.

    The driver never sends one there (a sample asks for checked nodes only, by node id): this is the node's own
    guard."""


class NodeEngineFailed(IspmError):
    """A node's Docker engine failed around a sample: it did not answer before the sample, or stopped answering while
    the sample ran. The fault is the node's, never the agent's: the driver counts the try lost, runs the sample on
    another node and benches this one until it passes its checks again."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class NodeExpectations(_Model):
    """What a node must match before it takes work: the driver's versions and digests and ``run_started``'s images."""

    runner_version: str
    """``ispm``'s version on the driver."""
    world_logical: str
    """The world snapshot's logical digest."""
    task_set: str
    """The task set's digest."""
    ground_truth: str
    """The published ground truth's digest."""
    images: dict[str, str]
    """Image id by tag, as ``run_started`` recorded them."""
    candidate_model: str | None = None
    """The model id ``run_started`` recorded for the candidate (preflight's probe); a node's own probe must return
    the same. ``None`` when the run has no candidate, or any answer will do."""

    @classmethod
    def of_this_install(cls, images: dict[str, str]) -> NodeExpectations:
        """What this install's own version and digests are, with ``images``: for checks made outside a run (the
        bench, tests), where no ``run_started`` recorded them."""
        digests = current_digests()
        return cls(
            runner_version=__version__,
            world_logical=digests.world_logical,
            task_set=digests.task_set,
            ground_truth=digests.ground_truth,
            images=images,
        )


class NodeCheck(_Model):
    """What a node found on itself."""

    node: str
    """The Ray node id."""
    host: str
    """The node's host name."""
    runner_version: str
    world_logical: str | None
    """``None`` when the node's snapshot does not verify against its manifest."""
    world_error: str | None = None
    """Why the node's world did not verify."""
    task_set: str | None
    ground_truth: str | None
    images: dict[str, str | None]
    """The engine's image id by expected tag; ``None`` when the engine does not have the tag."""
    engine_error: str | None = None
    """Why the node's Docker engine could not be reached; ``None`` when it answered."""
    gateway_error: str | None = None
    """Why the node's model gateway could not start (a missing provider key, say); ``None`` when it started or
    the run needs none."""
    probe_error: str | None = None
    """Why the node's probe of the candidate, with the node's own key, failed; ``None`` when it answered or the
    run needs no model."""
    candidate_model: str | None = None
    """The model id the node's provider returned for the candidate (empty when it returned none); ``None`` when the
    node did not probe it."""

    def refusals(self, expected: NodeExpectations) -> list[str]:
        """Every way this node differs from ``expected``, except images it merely lacks (those are shipped)."""
        where = f"node {self.node[:12]} ({self.host})"
        found: list[str] = []
        pairs = [
            ("ispm version", self.runner_version, expected.runner_version),
            ("world logical digest", self.world_logical, expected.world_logical),
            ("task set digest", self.task_set, expected.task_set),
            ("ground truth digest", self.ground_truth, expected.ground_truth),
        ]
        for what, mine, theirs in pairs:
            if mine != theirs:
                found.append(f"{where}: {what} is {mine}, the driver's is {theirs}")
        if self.world_error:
            found.append(f"{where}: its world does not verify: {self.world_error}")
        for tag, want in expected.images.items():
            have = self.images.get(tag)
            if have is not None and have != want:
                found.append(f"{where}: image {tag} is {have}, run_started recorded {want}; it is never rebuilt there")
        if self.engine_error:
            found.append(f"{where}: its Docker engine cannot be reached: {self.engine_error}")
        if self.gateway_error:
            found.append(f"{where}: its model gateway cannot start: {self.gateway_error}")
        if self.probe_error:
            found.append(f"{where}: its probe of the candidate failed: {self.probe_error}")
        elif (
            self.candidate_model is not None
            and expected.candidate_model is not None
            and self.candidate_model != expected.candidate_model
        ):
            found.append(
                f"{where}: its provider returned model {self.candidate_model!r} for the candidate, run_started "
                f"recorded {expected.candidate_model!r}"
            )
        return found

    def missing(self, expected: NodeExpectations) -> list[str]:
        """The expected tags this node's engine does not have: the driver ships them (none when the engine did not
        answer: there is nothing to ship to)."""
        if self.engine_error:
            return []
        return [tag for tag in expected.images if self.images.get(tag) is None]


class NodeResult(_Model):
    """One sample's result as its node hands it back: the output, the gateway's usage and the node."""

    output: SampleOutput
    usage: SampleUsage | None
    """The agent's usage as the node's gateway counted it; ``None`` when the sample had no gateway."""
    node: str
    """The Ray node id the sample ran on."""
    engine: str | None = None
    """The node's Docker engine that ran it, ``<host>:<data root> (<engine ID>)`` (``docker info``)."""
    transcript: EncodedPart | None = None
    """The agent's model calls as the node's gateway captured them, encoded there (docs/trace.md); ``None`` without
    a gateway, or when the node could not encode it."""
