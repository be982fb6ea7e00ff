"""The sandbox backends end to end: the built-in agents, the time limit, cleanup, sweep and the gateway path.

The conformance cases run against every backend (``docker`` on the real engine, and ``local``). Every Docker
resource a test makes carries ``ispm.sandbox=1`` and this module's own ``ispm.run``, and the module's
finalizer sweeps that run, so a failing test leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest
import structlog
from docker_fixtures import archive_backend, docker_backend
from fake_provider import OPENAI_MODEL, FakeProvider

from runner.contract import Answer
from runner.errors import SandboxError
from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway
from runner.paths import tasks_dir
from runner.sandbox.backend import (
    LABEL_ATTEMPT,
    LABEL_BOARD,
    LABEL_NODE,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SANDBOX,
    OWNER_FILE,
    Backend,
    Removals,
    SampleSpec,
    gateway_link,
    owner_id,
    process_scratch,
    scratch_root,
    sweep_scratch,
)
from runner.sandbox.collect import CollectLimits, OutputFile, files_from_dir, parse_queries, validate_answer
from runner.sandbox.docker import DockerBackend, sweep
from runner.sandbox.images import ImageRef
from runner.sandbox.local import LocalBackend
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.view import agent_files

__all__ = ["archive_backend", "docker_backend"]  # fixtures, imported for pytest
RUN = f"test-sandbox-{uuid.uuid4().hex[:8]}"
TASK_ID = "ispm-001"
REPLAY_QUERIES = [
    "SELECT count(*) AS n FROM okta_users",
    "SELECT id, status FROM hibob_people ORDER BY id LIMIT 3",
]


@pytest.fixture(scope="module")
def task() -> Task:
    return {t.id: t for t in load_tasks(tasks_dir())}[TASK_ID]


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("docker-archive", marks=pytest.mark.docker),
        "local",
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend[Any]:
    if request.param == "docker":
        docker_backend: DockerBackend = request.getfixturevalue("docker_backend")
        return docker_backend
    if request.param == "docker-archive":
        archive_backend: DockerBackend = request.getfixturevalue("archive_backend")
        return archive_backend
    return LocalBackend()


def make_spec(task: Task, image: str, **overrides: Any) -> SampleSpec:
    settings: dict[str, Any] = {
        "task_id": task.id,
        "run_id": RUN,
        "image": image,
        "task_files": agent_files(task, time_limit_seconds=60),
        "time_limit_s": 60,
        "memory_bytes": 256 * 1024**2,
        "pids": 64,
        **overrides,
    }
    return SampleSpec(**settings)


def leftovers(run_id: str = RUN) -> tuple[list[Any], list[Any]]:
    client = docker.from_env()
    try:
        wanted = {"label": [f"{LABEL_RUN}={run_id}"]}
        return client.api.containers(all=True, filters=wanted), client.api.volumes(filters=wanted).get("Volumes") or []
    finally:
        client.close()


# -- conformance: every backend -----------------------------------------------------------------------------


def test_null_agent_end_to_end(backend: Backend[Any], refs: dict[str, ImageRef], task: Task) -> None:
    out = backend.run_sample(make_spec(task, refs["agent-null"].tag))
    assert (out.status, out.error, out.exit_code, out.oom_killed) == ("ok", None, 0, False)
    assert out.answer == Answer(response="")
    assert out.queries == [] and out.trace == []
    assert (out.task_id, out.epoch) == (task.id, 1)
    assert out.timings.agent > 0 and out.timings.remove > 0


def test_replay_agent_replays_queries_against_the_real_world(
    backend: Backend[Any], refs: dict[str, ImageRef], task: Task, tmp_path: Path, world_db: sqlite3.Connection
) -> None:
    answer = {"response": "Nobody.", "verdict": None, "evidence": [], "queries": REPLAY_QUERIES}
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / f"{task.id}.json").write_text(json.dumps({"queries": REPLAY_QUERIES, "answer": answer}))
    out = backend.run_sample(make_spec(task, refs["agent-replay"].tag, replay_dir=replay))
    assert out.status == "ok", out.error
    assert out.answer == Answer.model_validate(answer)
    assert [q.sql for q in out.queries] == REPLAY_QUERIES
    assert [q.error for q in out.queries] == [None, None]
    # The row counts are the real world's, so the queries ran against the mounted snapshot.
    expected = [len(world_db.execute(sql).fetchall()) for sql in REPLAY_QUERIES]
    assert [q.row_count for q in out.queries] == expected
    assert all(q.result_digest and q.result_digest.startswith("sha256:") for q in out.queries)
    assert "2 queries replayed" in out.stdout_tail


def test_time_limit_kills_the_agent_and_still_collects(
    backend: Backend[Any], refs: dict[str, ImageRef], task: Task
) -> None:
    script = textwrap.dedent(
        """
        import json, os, time
        out = os.environ.get("ISPM_OUTPUT_DIR", "/output")
        with open(os.path.join(out, "answer.json"), "w") as f:
            json.dump({"response": "partial"}, f)
        print("wrote the answer, now sleeping", flush=True)
        time.sleep(60)
        """
    )
    out = backend.run_sample(make_spec(task, refs["base"].tag, command=["python3", "-c", script], time_limit_s=2))
    assert out.status == "timeout"
    assert out.error == "the agent ran past the time limit of 2 s and was killed"
    assert out.answer == Answer(response="partial")
    assert "now sleeping" in out.stdout_tail
    assert 2 <= out.timings.agent < 4


def test_the_gateway_path_reaches_the_gateway_with_the_right_token(
    backend: Backend[Any], refs: dict[str, ImageRef], task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = textwrap.dedent(
        """
        import json, os, urllib.error, urllib.request
        base, token = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
        body = json.dumps({"model": "any", "messages": [{"role": "user", "content": "Who lacks MFA?"}]}).encode()

        def call(key):
            request = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
                headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    return reply.status, json.load(reply)
            except urllib.error.HTTPError as exc:
                return exc.code, json.load(exc)

        good = call(token)
        bad = call("not-the-token")
        result = {"base": base, "good": good[0], "model": good[1].get("model"), "text": good[1]["choices"][0]["message"]["content"], "bad": bad[0]}
        out = os.environ.get("ISPM_OUTPUT_DIR", "/output")
        json.dump({"response": json.dumps(result)}, open(os.path.join(out, "answer.json"), "w"))
        """
    )
    host_key = "sk-host-key-never-in-the-sandbox"
    with FakeProvider() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", host_key)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base)
        with Gateway("openai/gpt-4.1", settings=ClientSettings(max_attempts=1)) as gateway:
            spec = make_spec(task, refs["base"].tag, command=["python3", "-c", agent])
            with gateway_link(gateway, spec.sample_id) as (folder, token):
                out = backend.run_sample(spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token}))
                usage = gateway.usage(spec.sample_id)
        assert out.status == "ok", (out.error, out.stderr_tail)
        assert out.answer is not None
        result = json.loads(out.answer.response)
        # In a container the forwarder has the fixed port; the local backend's picks a free one.
        expected = "http://127.0.0.1:8765/v1" if isinstance(backend, DockerBackend) else result["base"]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", result["base"])
        assert result == {
            "base": expected,
            "good": 200,
            "model": OPENAI_MODEL,
            "text": "ok",
            "bad": 401,
        }
        assert usage.requests == 1 and usage.tokens.input_tokens == 11 and usage.model_ids == [OPENAI_MODEL]
        # The provider saw the host's key, and only the one authorised request.
        assert len(fake.seen) == 1 and fake.seen[0].headers["authorization"] == f"Bearer {host_key}"
        assert token.get_secret_value() not in json.dumps(out.model_dump(mode="json"))
    assert not folder.exists()


# -- docker only -----------------------------------------------------------------------------------------------


@pytest.mark.docker
def test_the_container_is_locked_down(docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task) -> None:
    script = textwrap.dedent(
        """
        import json, os
        status = open("/proc/self/status").read()
        caps = [l.split()[1] for l in status.splitlines() if l.startswith(("CapEff", "CapBnd", "CapPrm"))]
        nnp = [l.split()[1] for l in status.splitlines() if l.startswith("NoNewPrivs")]
        mounts = {l.split()[1]: l.split()[3] for l in open("/proc/self/mounts")}
        facts = {
            "uid": os.getuid(), "gid": os.getgid(), "caps": caps, "nnp": nnp,
            "ifaces": sorted(os.listdir("/sys/class/net")),
            "root": mounts["/"], "task": mounts["/task"], "docs": mounts["/docs"],
            "world": mounts["/world/ispm-crossvendor-v1.sqlite"], "output": mounts["/output"], "tmp": mounts["/tmp"],
            "task_files": sorted(os.listdir("/task")), "world_files": sorted(os.listdir("/world")),
        }
        json.dump({"response": json.dumps(facts)}, open("/output/answer.json", "w"))
        """
    )
    out = docker_backend.run_sample(make_spec(task, refs["base"].tag, command=["python3", "-c", script]))
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.answer is not None
    facts = json.loads(out.answer.response)
    assert (facts["uid"], facts["gid"]) == (10001, 10001)
    assert facts["caps"] == ["0000000000000000"] * 3 and facts["nnp"] == ["1"]
    assert facts["ifaces"] == ["lo"]
    for name in ("root", "task", "docs", "world"):
        assert facts[name].split(",")[0] == "ro", name
    assert facts["output"].startswith("rw") and "size=32768k" in facts["output"]
    assert "noexec" in facts["tmp"] and "size=65536k" in facts["tmp"]
    assert facts["task_files"] == ["prompt.md", "task.json"]
    assert facts["world_files"] == ["ispm-crossvendor-v1.sqlite"]


@pytest.mark.docker
def test_no_labelled_resources_are_left(docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task) -> None:
    for _ in range(2):
        assert docker_backend.run_sample(make_spec(task, refs["agent-null"].tag)).status == "ok"
    containers, volumes = leftovers()
    assert containers == [] and volumes == []
    assert not any(process_scratch().glob("*/task"))  # each sample's folder went with it


@pytest.mark.docker
def test_samples_removed_behind_them_leave_nothing_once_the_backend_waits(
    refs: dict[str, ImageRef], task: Task
) -> None:
    backend = DockerBackend(sweep_on_start=False, remove_behind=True)
    try:
        for epoch in (1, 2, 3):
            out = backend.run_sample(make_spec(task, refs["agent-null"].tag, epoch=epoch))
            assert (out.status, out.error) == ("ok", None)
        backend.wait_removed()
        assert leftovers() == ([], [])
        assert not any(process_scratch().glob("*/task"))
        # A sample whose container still runs (the keeper's, in the keeper layout) is removed before run_sample
        # returns, never behind it.
        backend.holds_output = False
        assert backend.run_sample(make_spec(task, refs["agent-null"].tag, epoch=4)).status == "ok"
        assert leftovers() == ([], [])
        assert not any(process_scratch().glob("*/task"))
        assert backend.run_sample(make_spec(task, refs["agent-null"].tag, epoch=5)).status == "ok"
    finally:
        backend.close()  # waits for the removals behind the samples
    assert leftovers() == ([], [])


def test_removals_behind_wait_for_room_and_a_failed_one_is_logged_for_the_sweep() -> None:
    removals = Removals(bound=2)
    release = threading.Event()
    done: list[str] = []

    def slow(name: str) -> Callable[[], None]:
        def remove() -> None:
            release.wait(10)
            done.append(name)

        return remove

    def failing() -> None:
        raise SandboxError("cleanup failed: volume: in use", sample_id="t.e3")

    assert removals.hand_over(slow("t.e1"), "t.e1", "r") and removals.hand_over(slow("t.e2"), "t.e2", "r")
    third = threading.Thread(target=removals.hand_over, args=(failing, "t.e3", "r"))
    third.start()
    third.join(0.3)
    assert third.is_alive() and done == []  # two waiting: the third sample's thread waits for room
    with structlog.testing.capture_logs() as logged:
        release.set()
        third.join(10)
        assert not third.is_alive()
        assert removals.hand_over(slow("t.e4"), "t.e4", "r")
        removals.wait()
    assert done == ["t.e1", "t.e2", "t.e4"]
    failed = [e for e in logged if e["event"] == "sandbox.remove_failed"]
    assert [(e["sample"], e["run"], e["left_to"]) for e in failed] == [("t.e3", "r", "sweep")]
    assert "in use" in failed[0]["error"]
    removals.close()
    assert removals.hand_over(slow("t.e5"), "t.e5", "r")  # a hand-over after close starts a new thread
    removals.close()
    assert done[-1] == "t.e5"


@pytest.mark.docker
def test_a_runner_killed_mid_sample_leaves_nothing_after_the_next_start(refs: dict[str, ImageRef], task: Task) -> None:
    killed_run = f"{RUN}-killed"
    program = textwrap.dedent(
        f"""
        from runner.sandbox.backend import SampleSpec
        from runner.sandbox.docker import DockerBackend
        spec = SampleSpec(task_id="{task.id}", run_id="{killed_run}", image="{refs["base"].tag}",
                          command=["sleep", "600"], task_files={agent_files(task)!r}, time_limit_s=600)
        DockerBackend(sweep_on_start=False).run_sample(spec)
        """
    )
    runner = subprocess.Popen([sys.executable, "-c", program])
    try:
        deadline = time.monotonic() + 30
        while not leftovers(killed_run)[0]:
            assert time.monotonic() < deadline and runner.poll() is None, "the sample never started"
            time.sleep(0.1)
        scratch = [f for f in scratch_root().glob(f"*/{OWNER_FILE}") if f.read_text().startswith(f"{runner.pid}-")]
        assert len(scratch) == 1
        scratch = [scratch[0].parent]
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    containers, volumes = leftovers(killed_run)
    assert len(containers) == 1 and len(volumes) == 1  # what kill -9 leaves

    DockerBackend().close()  # the next start
    assert leftovers(killed_run) == ([], [])
    assert not scratch[0].exists()


@pytest.mark.docker
def test_a_missing_image_is_a_recorded_sandbox_error(docker_backend: DockerBackend, task: Task) -> None:
    out = docker_backend.run_sample(make_spec(task, "ispm/no-such-image:0000"))
    assert out.status == "sandbox_error"
    assert out.error == "sample ispm-001.e1: image not found: ispm/no-such-image:0000 (build it first)"
    assert leftovers() == ([], [])


@pytest.mark.docker
def test_sweep_removes_planted_leftovers_of_dead_owners_only(refs: dict[str, ImageRef]) -> None:
    planted_run = f"{RUN}-planted"
    client = docker.from_env()
    # A dead owner: this very pid, but a start time no process of it ever had (pid reuse looks like this).
    dead = f"{owner_id().rsplit(':', 1)[0]}:1"
    live = owner_id()
    try:
        made = {}
        for who, owner in (("dead", dead), ("live", live)):
            labels = {LABEL_SANDBOX: "1", LABEL_RUN: planted_run, LABEL_OWNER: owner}
            container = client.api.create_container(refs["base"].tag, ["sleep", "infinity"], labels=labels)
            client.api.start(container["Id"])
            volume = client.api.create_volume(name=f"ispm-planted-{who}-{uuid.uuid4().hex[:6]}", labels=labels)
            made[who] = (container["Id"], volume["Name"])

        # Another runner starting on this engine may sweep the dead owner's leftovers first: check the result.
        sweep(client, orphans_only=True)
        remaining, volumes = leftovers(planted_run)
        assert [c["Id"] for c in remaining] == [made["live"][0]]
        assert [v["Name"] for v in volumes] == [made["live"][1]]

        report = sweep(client, planted_run)
        assert report.containers == [made["live"][0][:12]] and report.volumes == [made["live"][1]]
        assert leftovers(planted_run) == ([], [])
    finally:
        sweep(client, planted_run)
        client.close()


def _start_ticks(pid: int) -> str:
    # Field 22 of /proc/<pid>/stat, after the parenthesised command: how a scratch folder names its owner.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_a_sweep_of_every_run_spares_the_scratch_of_a_live_owner_and_removes_a_dead_ones() -> None:
    owner = subprocess.Popen(["sleep", "60"])  # another runner, alive, with a sample's /task in its folder
    process_scratch()  # makes the shared root
    live, dead, unowned, stale = (Path(tempfile.mkdtemp(dir=scratch_root())) for _ in range(4))
    (live / OWNER_FILE).write_text(f"{owner.pid}-{_start_ticks(owner.pid)}")
    (dead / OWNER_FILE).write_text(f"{owner.pid}-1")  # the same pid with a start time it never had: a dead owner
    os.utime(stale, (time.time() - 3600, time.time() - 3600))  # no owner file for an hour: its maker was killed
    try:
        for folder in (live, dead):
            (folder / "x" / "task").mkdir(parents=True)
            (folder / "x" / "task" / "prompt.md").write_text("the task")
        removed, failures = sweep_scratch()
        assert (str(dead) in removed, str(live) in removed, failures) == (True, False, [])
        assert (str(stale) in removed, str(unowned) in removed) == (True, False)  # unowned: being made right now
        assert (live / "x" / "task" / "prompt.md").read_text() == "the task"
        assert not dead.exists()
    finally:
        owner.kill()
        owner.wait()
        for folder in (live, dead, unowned, stale):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_boards_sample_is_labelled_with_its_board(task: Task) -> None:
    assert make_spec(task, "any").model_copy(update={"board": "north"}).labels()[LABEL_BOARD] == "north"
    assert LABEL_BOARD not in make_spec(task, "any").labels()  # not a board's: no board label


def test_a_cluster_sample_is_labelled_with_its_node(task: Task) -> None:
    assert make_spec(task, "any").model_copy(update={"node": "node-a"}).labels()[LABEL_NODE] == "node-a"
    assert LABEL_NODE not in make_spec(task, "any").labels()  # one machine: no node label


def test_a_run_attempts_sample_is_labelled_with_its_attempt(task: Task) -> None:
    assert make_spec(task, "any").model_copy(update={"attempt": "a1b2"}).labels()[LABEL_ATTEMPT] == "a1b2"
    assert LABEL_ATTEMPT not in make_spec(task, "any").labels()  # outside a run (ispm sandbox try): no attempt


# -- collection, without any backend ---------------------------------------------------------------------------


def test_collection_reports_links_and_skips_malformed_query_lines(tmp_path: Path) -> None:
    (tmp_path / "answer.json").symlink_to("/etc/passwd")
    lines = [
        json.dumps({"ts": "2026-01-01T00:00:00Z", "sql": "SELECT 1", "row_count": 1}),
        "{not json",
        json.dumps({"sql": "no ts"}),
        json.dumps({"ts": "2026-01-01T00:00:01Z", "sql": "SELECT 2"}),
    ]
    (tmp_path / "queries.jsonl").write_text("\n".join(lines) + "\n")
    limits = CollectLimits()
    files = files_from_dir(tmp_path, limits)
    assert validate_answer(files["answer.json"], limits) == (
        None,
        "answer.json is a symlink (to '/etc/passwd'), not a regular file",
    )
    entries, notes = parse_queries(files["queries.jsonl"], limits)
    assert [e.sql for e in entries] == ["SELECT 1", "SELECT 2"]
    assert notes == ["queries.jsonl: 2 malformed lines skipped (first: line 2)"]


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (OutputFile("answer.json"), "answer.json missing"),
        (OutputFile("answer.json", "directory"), "answer.json is not a regular file (directory)"),
        (
            OutputFile("answer.json", "regular", size=2_000_000),
            "answer.json is 2000000 bytes, over the 1000000-byte limit",
        ),
        (OutputFile("answer.json", "regular", size=4, data=b"{}"), "answer.json does not match the answer schema"),
        (OutputFile("answer.json", "regular", size=5, data=b"{oops"), "answer.json does not match the answer schema"),
    ],
)
def test_answer_validation_names_the_reason(entry: OutputFile, reason: str) -> None:
    answer, error = validate_answer(entry, CollectLimits())
    assert answer is None and error is not None and error.startswith(reason)


@pytest.mark.docker
def test_the_agent_runs_as_the_main_process_behind_an_execute_only_init(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    if not docker_backend.holds_output:
        pytest.skip("this process cannot hold the engine's volumes: the keeper layout is used")
    script = textwrap.dedent(
        """
        import json, os
        def readable(path):
            try:
                open(path, "rb").read(1)
                return True
            except OSError:
                return False
        facts = {
            "ppid": os.getppid(), "pid1": open("/proc/1/cmdline").read().split("\\0")[:4],
            "init_readable": readable("/ispm/bin/init"), "pid1_mem_readable": readable("/proc/1/mem"),
            "stdin": os.read(0, 10).decode(),
        }
        json.dump({"response": json.dumps(facts)}, open("/output/answer.json", "w"))
        """
    )
    out = docker_backend.run_sample(make_spec(task, refs["base"].tag, command=["python3", "-c", script]))
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.answer is not None
    facts = json.loads(out.answer.response)
    assert facts["ppid"] == 1 and facts["pid1"] == ["/ispm/bin/init", "--", "/bin/sh", "-c"]
    assert facts["init_readable"] is False and facts["pid1_mem_readable"] is False
    assert facts["stdin"] == ""  # the gate line was for the gate; the agent's stdin is at its end


@pytest.mark.docker
def test_a_volume_that_cannot_be_held_falls_back_to_the_keeper_layout(
    refs: dict[str, ImageRef], task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = DockerBackend(sweep_on_start=False)
    try:
        if not backend.holds_output:
            pytest.skip("this process cannot hold the engine's volumes: the keeper layout is used")
        # As if this process were in another mount namespace than the engine: the mount point is not the tmpfs.
        monkeypatch.setattr("runner.sandbox.docker.volume.hold", lambda path, size: None)
        out = backend.run_sample(make_spec(task, refs["agent-null"].tag))
        assert (out.status, out.error, out.exit_code) == ("ok", None, 0)
        assert backend.holds_output is False
        assert backend.run_sample(make_spec(task, refs["agent-null"].tag, epoch=2)).status == "ok"
    finally:
        backend.close()
    assert leftovers() == ([], [])


@pytest.mark.docker
def test_an_image_that_cannot_run_the_gate_fails_its_sample_and_keeps_the_layout(
    refs: dict[str, ImageRef], task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = DockerBackend(sweep_on_start=False)
    try:
        if not backend.holds_output:
            pytest.skip("this process cannot hold the engine's volumes: the keeper layout is used")
        monkeypatch.setattr("runner.sandbox.docker.held.GATE", ["/no/such/shell"])
        out = backend.run_sample(make_spec(task, refs["agent-null"].tag))
        # The init fails to start the gate: the container stops at once, before or after /output is held.
        assert out.status in ("sandbox_error", "agent_error"), out.error
        assert out.answer is None
        assert backend.holds_output is True
    finally:
        backend.close()
    assert leftovers() == ([], [])
