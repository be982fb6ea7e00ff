"""The per-node agent: one Ray actor per node and run, pinned to its node.

It checks the node against the driver (``ispm`` version, world, tasks, images, its Docker engine, the candidate as
this node's key reaches it), loads images the driver ships, runs the node's model gateway with the node's own
provider keys, links each sample to it with a per-sample token and Unix socket on this host, and sweeps this host's
orphaned sandboxes. Sample tasks on the node find it by name
(:func:`runner.cluster.agent_name`).
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner import __version__, log
from runner.cluster.model import NodeCheck, NodeExpectations
from runner.cluster.probe import probe_here
from runner.errors import GatewayError, IspmError, SandboxError
from runner.gateway.model import SampleUsage
from runner.gateway.preflight import PreflightError
from runner.gateway.providers import PROVIDERS, Endpoint, parse_model
from runner.gateway.server import Gateway
from runner.run.digests import current_digests
from runner.sample_key import SampleKey
from runner.sandbox.backend import GATEWAY_SOCKET_NAME, SweepReport, process_scratch
from runner.sandbox.docker import connect, engine_fault, sweep
from runner.sandbox.transfer import engine_image_ids, load_chunks
from runner.transcript.storage import EncodedPart, TranscriptError

_log = log.get(__name__)


class NodeLink:
    """Where a sample reaches its node's gateway: the socket's folder on this host, the token and the model."""

    def __init__(self, folder: str, token: str, model: str) -> None:
        """A link through ``folder``/gateway.sock with ``token`` to ``model``."""
        self.folder = folder
        self.token = token
        self.model = model


class NodeAgent:
    """One node's part in one run. Thread-safe: Ray calls it from several threads (``max_concurrency``)."""

    def __init__(self, candidate: str | None, board: str | None = None) -> None:
        """Start the node's gateway for ``candidate`` (none for calibration runs), keys from this node's environment.
        ``board``: the board whose run this is, if any; the agent's sweeps then touch only that board's sandboxes.

        A gateway that cannot start does not fail the actor: :meth:`check` reports it, and the driver refuses the
        node with the reason.
        """
        import ray

        self.node = str(ray.get_runtime_context().get_node_id())
        self.candidate = candidate
        self.board = board
        self.accepted = False
        self.gateway: Gateway | None = None
        self.gateway_error: str | None = None
        self._folders: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._probe: tuple[str | None, str | None] | None = None
        if candidate is not None:
            try:
                self.gateway = Gateway(candidate)
            except IspmError as exc:
                self.gateway_error = str(exc)

    # -- checks and images ---------------------------------------------------------------------------------

    def credentials(self) -> str | None:
        """A digest of how this node reaches the candidate (endpoint and key): nodes with the same one reach it the
        same way, so one probe answers for all of them. ``None`` without a candidate or a gateway."""
        if self.candidate is None or self.gateway is None:
            return None
        return reach_digest(self.candidate)

    def check(self, expected: NodeExpectations, probed: tuple[str | None, str | None] | None = None) -> NodeCheck:
        """What this node has, against ``expected``; sweeps this host's orphans first, and probes the candidate with
        this node's key (once per agent), unless ``probed`` is the answer (why it failed, the model id) of a node
        whose :meth:`credentials` are the same. Accepts the node when nothing differs and nothing is missing."""
        if probed is not None and self._probe is None and self.gateway is not None:
            self._probe = probed
        world_logical: str | None = None
        world_error: str | None = None
        task_set = ground_truth = None
        try:
            digests = current_digests()
            world_logical, task_set, ground_truth = digests.world_logical, digests.task_set, digests.ground_truth
        except IspmError as exc:
            world_error = str(exc)
        images: dict[str, str | None] = {}
        # A short answer first: a hung engine would hold every call below for the client's minute.
        engine_error = engine_fault()
        try:
            if engine_error is None:
                self.sweep(None, orphans_only=True)
                with _engine() as client:
                    images = engine_image_ids(client, expected.images)
        except SandboxError as exc:
            engine_error = str(exc)
        probe_error, candidate_model = self._probed()
        found = NodeCheck(
            node=self.node,
            host=socket.gethostname(),
            runner_version=__version__,
            world_logical=world_logical,
            world_error=world_error,
            task_set=task_set,
            ground_truth=ground_truth,
            images=images,
            engine_error=engine_error,
            gateway_error=self.gateway_error,
            probe_error=probe_error,
            candidate_model=candidate_model,
        )
        self.accepted = not found.refusals(expected) and not found.missing(expected)
        _log.info("cluster.node_checked", node=self.node, accepted=self.accepted)
        return found

    def _probed(self) -> tuple[str | None, str | None]:
        """(why the probe failed, the model id it returned) for this agent's candidate; (None, None) when there is
        nothing to probe (no candidate, or no gateway to spend it: the gateway's error says why)."""
        if self.candidate is None or self.gateway is None:
            return None, None
        if self._probe is None:
            try:
                self._probe = (None, probe_here(self.candidate).returned_model or "")
            except PreflightError as exc:
                self._probe = ("; ".join(exc.problems), None)
        return self._probe

    def load_image(self, chunks: list[Any]) -> None:
        """``docker load`` the stream whose pieces are the object refs ``chunks``, fetched one at a time.

        Raises:
            SandboxError: the engine refused the stream.
        """
        import ray

        with _engine() as client:
            load_chunks(client, (ray.get(ref) for ref in chunks))

    def is_accepted(self) -> bool:
        """Whether this node passed its last :meth:`check`."""
        return self.accepted

    # -- the gateway -----------------------------------------------------------------------------------------

    def open_link(self, sample_id: str) -> NodeLink:
        """A per-sample Unix socket on this host, bound to ``sample_id``, and a fresh token for it.

        Raises:
            GatewayError: the node has no gateway, the socket cannot be bound, or the sample holds a live token.
        """
        if self.gateway is None:
            raise GatewayError(f"node {self.node[:12]} has no model gateway: {self.gateway_error or 'none asked for'}")
        # In the process's neutral scratch folder, as on one machine: the mount names no user's path (docs/sandbox.md).
        folder = Path(tempfile.mkdtemp(prefix="", dir=process_scratch()))
        # The container's keeper (uid 65534) must traverse it; the socket is 0666 and the token guards it.
        folder.chmod(0o755)
        try:
            self.gateway.listen_unix(folder / GATEWAY_SOCKET_NAME, sample_id=sample_id)
            token = self.gateway.issue_token(sample_id)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        with self._lock:
            self._folders[sample_id] = folder
        return NodeLink(str(folder), token, self.gateway.model)

    def close_link(self, sample_id: str) -> SampleUsage:
        """Revoke the sample's token (waiting for its requests in flight), remove its socket, return its usage."""
        assert self.gateway is not None  # open_link refused otherwise
        try:
            self.gateway.revoke(sample_id)
        finally:
            with self._lock:
                folder = self._folders.pop(sample_id, None)
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        return self.gateway.usage(sample_id)

    def take_transcript(self, sample_id: str, run_id: str, task_id: str, epoch: int) -> EncodedPart | None:
        """The sample's transcript, encoded to travel to the driver (call after :meth:`close_link`); ``None`` when
        the gateway captured none or it cannot be encoded (logged: the sample goes on without it)."""
        builder = None if self.gateway is None else self.gateway.transcript(sample_id)
        if builder is None:
            return None
        try:
            return builder.encoded(run_id, SampleKey(task_id=task_id, epoch=epoch))
        except TranscriptError as exc:
            _log.error("cluster.transcript_not_encoded", node=self.node, sample=sample_id, error=str(exc))
            return None

    # -- sweeping --------------------------------------------------------------------------------------------

    def sweep(self, run_id: str | None, *, attempt: str | None = None, orphans_only: bool) -> SweepReport:
        """Remove sandbox resources on this node's engine: ``run_id``'s (or every run's), only the run attempt
        ``attempt``'s if given (``ispm.attempt``), only those whose owner process is dead on this host if
        ``orphans_only`` (owners on other hosts are never touched).

        A live node's sandboxes are never orphans (their owner, the node's worker process, runs), so nodes that
        share an engine leave each other's alone; a dead node's are, so a survivor clears them. A finished run's
        are removed whoever made them. Every sandbox also carries its node (``ispm.node``) for people. A board's
        run sweeps only its board's (``ispm.board``): boards that share a node's engine leave each other's alone."""
        with _engine() as client:
            report = sweep(client, run_id, attempt=attempt, board=self.board, orphans_only=orphans_only)
        if report.containers or report.failures:
            _log.info("cluster.node_swept", node=self.node, containers=report.containers, failures=report.failures)
        return report

    def close(self) -> None:
        """Stop the gateway's listeners and provider connections."""
        if self.gateway is not None:
            self.gateway.close()


def reach_digest(candidate: str) -> str | None:
    """sha256 of the candidate, the base URL and the key this host's environment gives it; ``None`` when the
    environment does not resolve it. The key never leaves the node; its digest stays in the driver's memory."""
    try:
        provider, _ = parse_model(candidate)
        endpoint = Endpoint(PROVIDERS[provider])
    except (IspmError, KeyError):
        return None
    return hashlib.sha256("\0".join((candidate, endpoint.base_url, endpoint.key)).encode()).hexdigest()


@contextmanager
def _engine() -> Iterator[Any]:
    """A Docker client for one call, closed after."""
    client = connect()
    try:
        yield client
    finally:
        client.close()
