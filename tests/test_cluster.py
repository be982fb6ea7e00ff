"""The ``ray`` backend on a real Ray cluster: a head and two worker nodes started on this machine from the wheel,
on loopback only (tests/loopback_cluster.py).

Every node shares the local Docker engine, as nodes on one host would. The head advertises no ``ispm_sandbox``
unit, so every sample lands on a worker. Gold calibration runs all 127 tasks (about a minute here); the null agent and
the fault tests run a six-task subset, to spare two shared cores.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_fixtures import containers_of
from fake_provider import FakeProvider, Reply, openai_completion
from loopback_cluster import LOOPBACK, environment, loopback_cluster

from runner.cluster import SANDBOX_RESOURCE
from runner.cluster.connection import connected
from runner.cluster.driver import RayRunner, stage_image
from runner.cluster.model import ClusterError, NodeExpectations
from runner.gateway.preflight import PreflightError, preflight
from runner.paths import tasks_dir
from runner.pipeline import LOG_NAME, RunResult, image_ids, resume_run, start_run
from runner.run.calibration import calibration_spec
from runner.run.journal import JOURNAL_NAME, SampleFinished, SampleGraded, read_entries
from runner.run.spec import RunSpec
from runner.sample_key import SampleKey
from runner.sandbox.backend import SampleSpec
from runner.sandbox.transfer import engine_image_ids
from runner.sandbox.trial import resolve_image
from runner.tasks.load import load_tasks
from runner.tasks.view import agent_files
from runner.trace.reader import load_transcript

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

SUBSET = ["ispm-001", "ispm-010", "ispm-030", "ispm-060", "ispm-090", "ispm-127"]
SPREAD = [f"ispm-{n:03d}" for n in (*range(1, 127, 8), 127)]
"""Every eighth task and the last, of both kinds: the gold replay across the cluster. The whole set runs once per
suite, in ``test_demo``."""
JOIN_TASKS = 90
"""The mid-run join test's tasks: enough that the run is still going when the new nodes are admitted. 40 were not
always: in one CI run the 40 samples took 36 s, and the run ended before the node that joined was admitted."""
UNITS = 2
CANDIDATE_KEY = "sk-cluster-candidate-5e1d"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
ANSWER = {
    "response": "Scripted: the investigation counted Okta users by status.",
    "verdict": None,
    "evidence": [{"vendor": "okta", "kind": "account", "identifier": "00u-scripted", "fact": "It is scripted."}],
    "queries": [SQL],
}
AGENT_STEPS = [(101, 11, 0), (202, 22, 50), (303, 33, 0)]


class Nodes:
    """The cluster and the fake candidate provider whose key and address only the nodes' environment holds."""

    def __init__(self, cluster: Any, workers: list[Any], provider: FakeProvider) -> None:
        self.cluster = cluster
        self.workers = workers
        self.provider = provider

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def worker_ids(self) -> set[str]:
        return {str(w.node_id) for w in self.workers}


@pytest.fixture(scope="module")
def nodes() -> Iterator[Nodes]:
    with FakeProvider() as provider:
        # Nodes take their environment from the process that starts them: here, the candidate's key and address.
        env = {"OPENAI_API_KEY": CANDIDATE_KEY, "OPENAI_BASE_URL": provider.openai_base, "ANTHROPIC_API_KEY": None}
        with loopback_cluster(2, UNITS, env) as (cluster, workers):
            yield Nodes(cluster, workers, provider)


def _one_model_sample() -> RunSpec:
    """The reference agent on ``openai/cand`` (the fake), one sample of ispm-001, on the cluster."""
    return RunSpec(
        agent_image="reference",
        candidate="openai/cand",
        judges=("ref#1", "ref#2"),
        epochs=1,
        concurrency=1,
        tasks=["ispm-001"],
        backend="ray",
    )


def _graded(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.task_id, e.epoch) for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleGraded)]


def _calibration(nodes: Nodes, run_dir: Path, agent: str = "replay", tasks: list[str] | None = SUBSET) -> RunResult:
    spec = calibration_spec(agent, epochs=1, concurrency=2 * UNITS, tasks=tasks, backend="ray")  # type: ignore[arg-type]
    return start_run(spec, run_dir, ray_address=nodes.address)


def _descendants(root: int) -> set[int]:
    parents = {int(p.name): _parent(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid and c not in found]
        found.update(children)
        frontier += children
    return found


Address = tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]


def _address(field: str) -> Address:
    # /proc/net/tcp{,6}: the host as 32-bit words in host byte order, in hex, then the port. An IPv4 host on an
    # IPv6 socket (::ffff:a.b.c.d) is given as IPv4.
    host, port = field.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(int.from_bytes(raw[i : i + 4], sys.byteorder).to_bytes(4, "big") for i in range(0, len(raw), 4))
    found = ipaddress.ip_address(words)
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped, int(port, 16)
    return found, int(port, 16)


def _tcp_sockets(pids: set[int]) -> list[tuple[str, Address, Address]]:
    """(state, local address, peer address) of every TCP socket the processes ``pids`` hold; state 0A listens."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):  # a process may end while it is read
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(fd.path)
                    if link.startswith("socket:["):
                        inodes.add(link.removeprefix("socket:[").removesuffix("]"))
    return [
        (fields[3], _address(fields[1]), _address(fields[2]))
        for table in ("tcp", "tcp6")
        for fields in (row.split() for row in Path(f"/proc/net/{table}").read_text().splitlines()[1:])
        if fields[9] in inodes
    ]


def test_the_cluster_and_its_driver_stay_on_loopback(nodes: Nodes) -> None:
    assert {n.node_ip_address for n in nodes.cluster.list_all_nodes()} == {LOOPBACK}
    # This process connects as `ispm run` does: the loopback address must not be taken for the interface's.
    with connected(nodes.address):
        sockets = _tcp_sockets(_descendants(os.getpid()))
    host, port = nodes.address.rsplit(":", 1)
    assert ("0A", (ipaddress.ip_address(host), int(port))) in {(state, local) for state, local, _ in sockets}
    # Every Ray process here (GCS, raylets, agents, workers, this driver) listens and talks on loopback only.
    away = [s for s in sockets if not s[1][0].is_loopback or not (s[2][0].is_loopback or s[2][0].is_unspecified)]
    assert away == []


@pytest.mark.parametrize(("agent", "tasks", "expected"), [("replay", SPREAD, 1.0), ("null", SUBSET, 0.0)])
def test_calibration_across_the_cluster_scores_as_on_one_machine_on_both_workers(
    nodes: Nodes, tmp_path: Path, agent: str, tasks: list[str], expected: float
) -> None:
    result = _calibration(nodes, tmp_path / "run", agent, tasks)
    record = result.record
    planned = tasks
    assert record.status == "completed" and record.spec.backend == "ray" and record.calibration == agent
    assert record.scores is not None
    assert record.scores.dimensions["answer_correctness"].mean == expected
    assert sum(record.failures.values()) == 0
    assert sorted(_graded(tmp_path / "run")) == [(t, 1) for t in sorted(planned)]
    # Every sample names its node, and both workers ran some; the head advertises no sandbox unit.
    assert {s.node for s in record.samples} == nodes.worker_ids()
    assert all(s.attempts == [] for s in record.samples)
    assert containers_of(record.run_id) == []


def test_a_cluster_whose_every_node_is_refused_does_not_run_naming_each(nodes: Nodes) -> None:
    tag = resolve_image("replay")
    (real,) = image_ids(calibration_spec("replay", tasks=SUBSET)).values()
    expected = NodeExpectations.of_this_install({tag: "sha256:" + "0" * 64})
    with pytest.raises(ClusterError, match="every sandbox node of the cluster was refused") as caught:
        RayRunner.connect(nodes.address, "refused", expected, candidate=None)
    assert sorted(caught.value.problems) == sorted(
        f"node {n[:12]} ({os.uname().nodename}): image {tag} is {real}, run_started recorded sha256:{'0' * 64}; "
        "it is never rebuilt there"
        for n in nodes.worker_ids()
    )


def test_a_model_run_on_the_cluster_counts_tokens_as_on_one_machine(nodes: Nodes, tmp_path: Path) -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "run_sql", "arguments": json.dumps({"sql": SQL})}},
        {"id": "c3", "type": "function", "function": {"name": "submit_answer", "arguments": json.dumps(ANSWER)}},
    ]
    # Each worker probes the candidate with its own key at preflight; when the run checks its nodes, the two share a
    # key and endpoint, and one probe answers for both.
    probe = Reply(body=openai_completion("ok", model="cand-2026-11-01"))
    nodes.provider.push(*[probe for _ in nodes.workers], probe)
    for (prompt, completion, cached), call in zip(AGENT_STEPS, calls, strict=True):
        body = openai_completion(
            None, prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, tool_calls=[call]
        )
        nodes.provider.push(Reply(body=body))
    spec = _one_model_sample()
    # The driver holds no key: the gateway that spends it runs on the node, from the node's environment.
    saved = os.environ.pop("OPENAI_API_KEY")
    try:
        result = start_run(spec, tmp_path / "run", ray_address=nodes.address)
    finally:
        os.environ["OPENAI_API_KEY"] = saved
    assert result.record.resolved_models == {"openai/cand": "cand-2026-11-01"}
    (sample,) = result.record.samples
    assert sample.status == "ok", sample.error
    assert sample.node in nodes.worker_ids()
    assert sample.agent is not None
    assert (
        sample.agent.requests,
        sample.agent.input_tokens,
        sample.agent.output_tokens,
        sample.agent.cached_tokens,
    ) == (
        3,
        sum(p for p, _, _ in AGENT_STEPS),
        sum(c for _, c, _ in AGENT_STEPS),
        50,
    )
    assert [(c.api, c.outcome, c.input_tokens, c.output_tokens) for c in sample.agent_calls] == [
        ("chat", "ok", p, c) for p, c, _ in AGENT_STEPS
    ]
    assert result.record.agent_tokens == sample.agent
    # What the node's gateway kept of each call travels back with the sample, into the driver's run folder.
    transcript = load_transcript(tmp_path / "run", SampleKey(task_id="ispm-001", epoch=1))
    assert [(c.outcome, c.response.blocks[0].name) for c in transcript.calls("candidate") if c.response] == [  # type: ignore[union-attr]
        ("ok", "list_tables"),
        ("ok", "run_sql"),
        ("ok", "submit_answer"),
    ]
    assert {s.headers.get("authorization") for s in nodes.provider.seen} == {f"Bearer {CANDIDATE_KEY}"}
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert CANDIDATE_KEY.encode() not in path.read_bytes(), path


def test_a_node_without_the_candidates_key_is_left_out_of_a_model_run(nodes: Nodes, tmp_path: Path) -> None:
    odd = _odd_node(nodes, {"OPENAI_API_KEY": None})
    # The two workers with the key probe at preflight, and one of them for both at admission; the odd one cannot,
    # and is left out.
    probe = Reply(body=openai_completion("ok", model="cand-2026-11-01"))
    nodes.provider.push(*[probe for _ in nodes.workers], probe)
    submit = {"id": "c1", "type": "function", "function": {"name": "submit_answer", "arguments": json.dumps(ANSWER)}}
    nodes.provider.push(Reply(body=openai_completion(None, tool_calls=[submit])))
    spec = _one_model_sample()
    try:
        nodes.cluster.wait_for_nodes()
        result = start_run(spec, tmp_path / "run", ray_address=nodes.address)
    finally:
        nodes.cluster.remove_node(odd)
    record = result.record
    assert record.status == "completed" and record.resolved_models == {"openai/cand": "cand-2026-11-01"}
    (sample,) = record.samples
    assert sample.status == "ok" and sample.node in nodes.worker_ids() and sample.attempts == []
    (left,) = record.nodes_left_out
    assert (left.node, left.joined) == (str(odd.node_id), False)
    (reason,) = left.reasons
    where = f"node {left.node[:12]} ({os.uname().nodename})"
    assert reason.startswith(f"{where}: its model gateway cannot start: ") and "OPENAI_API_KEY" in reason


def test_a_resume_probes_the_candidate_once_for_nodes_that_share_a_key(nodes: Nodes) -> None:
    # A resume runs no preflight: its only probes are the nodes' checks, which nodes on one key and endpoint share.
    seen = len(nodes.provider.seen)
    nodes.provider.push(Reply(body=openai_completion("ok", model="cand-2026-11-01")))
    expected = NodeExpectations.of_this_install({}).model_copy(update={"candidate_model": "cand-2026-11-01"})
    with RayRunner.connect(nodes.address, "probe-once", expected, candidate="openai/cand") as cluster:
        admitted = set(cluster.agents)
    assert admitted == nodes.worker_ids() and cluster.left_out == {}
    assert len(nodes.provider.seen) - seen == 1


def test_a_node_without_the_candidates_key_fails_preflight_naming_itself(nodes: Nodes, tmp_path: Path) -> None:
    spec = RunSpec(agent_image="reference", candidate="anthropic/cand", judges=("ref#1", "ref#2"), backend="ray")
    with pytest.raises(PreflightError) as caught:
        start_run(spec, tmp_path / "run", ray_address=nodes.address)
    with pytest.raises(PreflightError) as here:
        preflight(["anthropic/cand"])  # this process lacks the key as the nodes do: the same words
    (missing,) = here.value.problems
    assert "ANTHROPIC_API_KEY" in missing
    assert sorted(caught.value.problems) == sorted(f"node {n[:12]}: {missing}" for n in nodes.worker_ids())
    assert not (tmp_path / "run" / JOURNAL_NAME).exists()


def test_the_sample_limit_holds_on_the_node(nodes: Nodes) -> None:
    task = next(t for t in load_tasks(tasks_dir()) if t.id == "ispm-001")
    spec = SampleSpec(
        task_id=task.id,
        run_id=f"limit-{secrets.token_hex(3)}",
        image=resolve_image("null"),
        command=["sleep", "60"],
        task_files=agent_files(task),
        time_limit_s=2.0,
    )
    with RayRunner.connect(nodes.address, spec.run_id, NodeExpectations.of_this_install({}), candidate=None) as cluster:
        started = time.monotonic()
        ran = cluster.run_sample(spec)
        took = time.monotonic() - started
    assert ran.output.status == "timeout" and ran.node in nodes.worker_ids() and ran.lost_tries == ()
    assert 2.0 <= ran.output.timings.agent < 10.0 and took < 30.0
    assert containers_of(spec.run_id) == []


def _tiny_image(client: Any, tag: str) -> str:
    # A one-file image made on the spot: shipping is about the stream, not the size.
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        body = b"shipped\n" * 1000
        info = tarfile.TarInfo("hello.txt")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    repository, _, version = tag.partition(":")
    client.api.import_image_from_data(payload.getvalue(), repository=repository, tag=version)
    return str(client.images.get(tag).id)


def test_an_image_ships_through_the_object_store_in_chunks_and_loads_on_a_node(nodes: Nodes) -> None:
    import docker
    import ray

    tag = f"ispm-test/shipped:{secrets.token_hex(4)}"
    client = docker.from_env()
    expected = NodeExpectations.of_this_install({})
    try:
        image_id = _tiny_image(client, tag)
        with RayRunner.connect(nodes.address, "ship", expected, candidate=None) as cluster:
            chunks = stage_image(client, tag, chunk_bytes=4096)
            assert len(chunks) > 2
            client.images.remove(tag)
            assert engine_image_ids(client, [tag]) == {tag: None}
            node = sorted(cluster.agents)[0]
            ray.get(cluster.agents[node].load_image.remote(chunks))
        assert engine_image_ids(client, [tag]) == {tag: image_id}
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag)
        client.close()


def _odd_node(nodes: Nodes, changes: dict[str, str | None]) -> Any:
    """One more worker like the others, its processes started with ``changes`` to the environment."""
    with environment(changes):
        return nodes.cluster.add_node(num_cpus=UNITS, resources={SANDBOX_RESOURCE: UNITS}, node_ip_address=LOOPBACK)


def _no_engine(tmp_path: Path) -> dict[str, str | None]:
    # A node whose Docker engine does not answer: it advertises sandbox units like any other.
    return {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}


def _engine_refusal(node: str) -> str:
    return f"node {node[:12]} ({os.uname().nodename}): its Docker engine cannot be reached: cannot reach the Docker engine: "


def test_a_node_that_fails_its_checks_is_left_out_and_the_run_goes_on_without_it(
    nodes: Nodes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = _odd_node(nodes, _no_engine(tmp_path))
    try:
        nodes.cluster.wait_for_nodes()
        result = _calibration(nodes, tmp_path / "run")
    finally:
        nodes.cluster.remove_node(odd)
    odd_id, record = str(odd.node_id), result.record
    assert record.status == "completed"
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    assert sorted(_graded(tmp_path / "run")) == [(t, 1) for t in SUBSET]
    # No sample went to the odd node: one that had would have been refused there and show as a lost attempt.
    assert {s.node for s in record.samples} <= nodes.worker_ids()
    assert all(s.attempts == [] for s in record.samples)
    (left,) = record.nodes_left_out
    assert (left.node, left.host, left.joined) == (odd_id, os.uname().nodename, False)
    (reason,) = left.reasons
    assert reason.startswith(_engine_refusal(odd_id))
    assert "cluster.node_left_out" in capsys.readouterr().err  # and it was said on the terminal
    assert containers_of(record.run_id) == []


def test_nodes_that_join_mid_run_are_checked_before_they_get_work(nodes: Nodes, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    tasks = sorted(t.id for t in load_tasks(tasks_dir()))[:JOIN_TASKS]
    # More samples in flight than the first two workers hold: some always wait, so a node admitted mid-run gets work.
    spec = calibration_spec("replay", epochs=1, concurrency=3 * UNITS, tasks=tasks, backend="ray")  # type: ignore[arg-type]
    found: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: found.setdefault("result", start_run(spec, run_dir, ray_address=nodes.address))
    )
    thread.start()
    joined: list[Any] = []
    try:
        journal = run_dir / JOURNAL_NAME
        deadline = time.monotonic() + 120
        while thread.is_alive() and time.monotonic() < deadline:
            if journal.exists() and b'"sample_finished"' in journal.read_bytes():
                break
            time.sleep(0.05)
        joined += [_odd_node(nodes, {}), _odd_node(nodes, _no_engine(tmp_path))]
    finally:
        thread.join(timeout=600)
        for node in joined:
            nodes.cluster.remove_node(node)
    good, bad = (str(n.node_id) for n in joined)
    record = found["result"].record
    assert record.status == "completed"
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    assert sorted(_graded(run_dir)) == [(t, 1) for t in tasks]
    # The node that passed took samples once admitted; none before (its own guard would have refused it, a lost
    # attempt); the one that failed took none.
    ran = {s.node for s in record.samples}
    assert good in ran and bad not in ran and ran <= nodes.worker_ids() | {good}
    assert all(s.attempts == [] for s in record.samples)
    (left,) = record.nodes_left_out
    assert (left.node, left.joined) == (bad, True)
    (reason,) = left.reasons
    assert reason.startswith(_engine_refusal(bad))
    events = [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]
    admitted = [e for e in events if e.get("event") == "cluster.nodes_admitted" and e.get("joined")]
    assert [sorted(e["nodes"]) for e in admitted] == [[good]]
    assert containers_of(record.run_id) == []


def test_a_driver_killed_with_kill_9_resumes_on_the_cluster(nodes: Nodes, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    script = (
        "import sys; from pathlib import Path; from runner.run.calibration import calibration_spec; "
        "from runner.pipeline import start_run; "
        "spec = calibration_spec('replay', epochs=1, concurrency=4, tasks=sys.argv[3:], backend='ray'); "
        "start_run(spec, Path(sys.argv[1]), ray_address=sys.argv[2])"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(run_dir), nodes.address, *SUBSET],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal = run_dir / JOURNAL_NAME
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and child.poll() is None:
        if journal.exists() and journal.read_bytes().count(b'"sample_graded"') >= 2:
            break
        time.sleep(0.05)
    child.kill()  # SIGKILL: no cleanup of any kind
    child.wait()
    done_before = set(_graded(run_dir))
    assert 2 <= len(done_before) < len(SUBSET)
    result = resume_run(run_dir, ray_address=nodes.address)
    assert result.outcome == "completed"
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in SUBSET]
    # Nothing finished was redone: the resume collected only what the killed driver had not.
    finished = [e for e in read_entries(journal) if isinstance(e, SampleFinished)]
    assert len(finished) == len({(e.output.task_id, e.output.epoch) for e in finished})
    assert result.record.scores is not None
    assert result.record.scores.dimensions["answer_correctness"].mean == 1.0
    assert containers_of(result.record.run_id) == []


def _raylet_pid(node: Any) -> int:
    return int(node.all_processes["raylet"][0].process.pid)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _running_on(run_id: str, raylets: dict[int, Any]) -> tuple[Any, int] | None:
    # A sample's container is labelled with the Ray worker process that made it; its parent is its node's raylet.
    # One listing call: a container may be removed between a listing and a per-container inspect.
    import docker

    client = docker.from_env()
    try:
        running = client.api.containers(filters={"label": f"ispm.run={run_id}", "status": "running"})
    finally:
        client.close()
    for container in running:
        owner = (container.get("Labels") or {}).get("ispm.owner", "")
        pid = owner.split(":")[1] if owner.count(":") == 2 else ""
        parent = _parent(int(pid)) if pid.isdigit() else None
        if parent in raylets:
            return raylets[parent], int(pid)
    return None


def _drivers_node() -> str | None:
    # On one machine the driver attaches to any local raylet (Ray prefers the head's); that node must not be killed.
    import ray

    node = ray._private.worker.global_worker.node
    return None if node is None else str(node._raylet_socket_name)


def test_a_worker_killed_mid_run_loses_nothing_and_leaves_no_container(nodes: Nodes, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    found: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: found.setdefault("result", _calibration(nodes, run_dir)))
    thread.start()
    try:
        running = None
        deadline = time.monotonic() + 120
        while running is None and time.monotonic() < deadline and thread.is_alive():
            entries = read_entries(run_dir / JOURNAL_NAME) if (run_dir / JOURNAL_NAME).exists() else []
            if entries:
                driver = _drivers_node()
                raylets = {_raylet_pid(w): w for w in nodes.workers if w._raylet_socket_name != driver}
                running = _running_on(entries[0].run_id, raylets)  # type: ignore[union-attr]
            time.sleep(0.02)
        assert running is not None, "no sample was seen running on a worker"
        victim, worker_pid = running
        victim_id = str(victim.node_id)
        # A machine that dies takes every process with it at once: the worker mid-sample first, then the node.
        os.kill(worker_pid, signal.SIGKILL)
        nodes.cluster.remove_node(victim, allow_graceful=False)
        nodes.workers.remove(victim)
    finally:
        thread.join(timeout=600)
    result: RunResult = found["result"]
    record = result.record
    assert record.status == "completed"
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in SUBSET]
    finished = [e for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleFinished)]
    assert len(finished) == len(SUBSET)
    lost = [(s.task_id, a.node, a.outcome) for s in record.samples for a in s.attempts]
    assert lost and {(node, outcome) for _, node, outcome in lost} == {(victim_id, "lost")}
    # A sample whose attempt was lost ran again on the surviving worker.
    survivors = {str(w.node_id) for w in nodes.workers}
    assert all(s.node in survivors for s in record.samples if s.attempts)
    assert containers_of(record.run_id) == []
