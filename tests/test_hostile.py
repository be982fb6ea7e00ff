"""Hostile agents, each in a real container: every one ends as a recorded sample failure with a specific reason,
and the runner carries on.

The probes try their attack directly and report each attempt on stderr as one JSON line; they exit 1 when
every forbidden attempt failed (the attack failed, so the agent "fails") and 0 if anything got through.
Network targets are addresses of this machine only (its bridge gateway, its own interface, loopback) plus
TEST-NET-1 (192.0.2.1), which is never routed: with ``network_mode=none`` nothing can leave anyway.
Every container and volume carries this module's ``ispm.run`` label and is swept at the end.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import resource
import socket
import textwrap
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import docker
import pytest
from docker_fixtures import archive_backend, docker_backend

from runner.contract import SampleOutput
from runner.paths import tasks_dir, world_dir
from runner.sandbox.backend import LABEL_RUN, SampleSpec
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import SPECS, ImageRef
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.truth import GROUND_TRUTH_NAME, GroundTruth, load_ground_truth
from runner.tasks.view import agent_files

pytestmark = pytest.mark.docker

__all__ = ["archive_backend", "docker_backend"]  # fixtures, imported for pytest
RUN = f"test-hostile-{uuid.uuid4().hex[:8]}"
TASK_ID = "ispm-001"
WORLD_FILE = world_dir() / "ispm-crossvendor-v1.sqlite"

PRELUDE = textwrap.dedent(
    """
    import json, os, socket, sys
    results = {}

    def attempt(name, action):
        try:
            action()
            results[name] = "ok"
        except Exception as exc:
            results[name] = f"{type(exc).__name__}: {exc}"

    def finish():
        print(json.dumps(results), file=sys.stderr, flush=True)
        forbidden = [v for k, v in results.items() if not k.startswith("allowed:")]
        sys.exit(0 if "ok" in forbidden else 1)
    """
)


@pytest.fixture(params=["direct", "archive"])
def reader(request: pytest.FixtureRequest) -> DockerBackend:
    """The backend, collecting by reading the volume's mount point or by streaming ``get_archive``."""
    name = "docker_backend" if request.param == "direct" else "archive_backend"
    runner: DockerBackend = request.getfixturevalue(name)
    return runner


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks(tasks_dir())


@pytest.fixture(scope="module")
def task(tasks: list[Task]) -> Task:
    return {t.id: t for t in tasks}[TASK_ID]


@pytest.fixture(scope="module")
def bridge_ip() -> str:
    client = docker.from_env()
    try:
        config = client.api.inspect_network("bridge")["IPAM"]["Config"][0]
    finally:
        client.close()
    # Older engines leave Gateway out of the inspect output: it is the subnet's first address.
    return str(config.get("Gateway") or ipaddress.ip_network(config["Subnet"])[1])


def run_probe(
    backend: DockerBackend, refs: dict[str, ImageRef], task: Task, script: str, *args: str, **limits: Any
) -> SampleOutput:
    settings: dict[str, Any] = {
        "task_id": task.id,
        "run_id": RUN,
        "image": refs["base"].tag,
        "command": ["python3", "-c", PRELUDE + textwrap.dedent(script), *args],
        "task_files": agent_files(task, time_limit_seconds=20),
        "time_limit_s": 20,
        "memory_bytes": 128 * 1024**2,
        "pids": 64,
        "output_bytes": 4 * 1024**2,
        "tmp_bytes": 4 * 1024**2,
        **limits,
    }
    return backend.run_sample(SampleSpec(**settings))


def attempts(out: SampleOutput) -> dict[str, str]:
    """The probe's report: the last stderr line."""
    result: dict[str, str] = json.loads(out.stderr_tail.strip().splitlines()[-1])
    return result


def assert_attack_failed(out: SampleOutput) -> dict[str, str]:
    assert (out.status, out.exit_code) == ("agent_error", 1), (out.status, out.error, out.stderr_tail)
    assert out.error is not None and out.error.startswith("the agent exited with code 1")
    report = attempts(out)
    escaped = {k: v for k, v in report.items() if v == "ok" and not k.startswith("allowed:")}
    assert escaped == {}
    return report


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class TcpWitness:
    """A host TCP server that counts the connections it accepts (it must see none)."""

    def __init__(self, host: str) -> None:
        self.server = socket.create_server((host, 0))
        self.server.settimeout(0.1)
        self.host, self.port = host, int(self.server.getsockname()[1])
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.server.close()


CONNECT = """
targets = json.loads(sys.argv[1])
def connect(host, port):
    with socket.create_connection((host, port), timeout=2):
        pass
for host, port in targets:
    attempt(f"tcp {host}:{port}", lambda h=host, p=port: connect(h, p))
"""


# -- the answer ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (
            '{"response": "cut off',
            "answer.json does not match the answer schema: 1 validation error for Answer\n  Invalid JSON",
        ),
        ('{"response": 1, "verdict": "maybe"}', "answer.json does not match the answer schema: 2 validation errors"),
        (
            "[]",
            "answer.json does not match the answer schema: 1 validation error for Answer\n  Input should be an object",
        ),
    ],
)
def test_malformed_answer(
    reader: DockerBackend, refs: dict[str, ImageRef], task: Task, content: str, reason: str
) -> None:
    out = run_probe(reader, refs, task, "open('/output/answer.json', 'w').write(sys.argv[1])", content)
    assert out.status == "invalid_answer" and out.exit_code == 0
    assert out.error is not None and out.error.startswith(reason), out.error


def test_a_50_mb_answer_hits_the_output_cap_and_is_never_read_whole(
    reader: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    chunk = b"x" * (1 << 20)
    with open("/output/answer.json", "wb") as f:
        try:
            for _ in range(50):
                f.write(chunk)
                f.flush()
        except OSError as exc:
            print("write failed:", exc, flush=True)
    """
    before = max_rss_mb()
    out = run_probe(reader, refs, task, script, output_bytes=8 * 1024**2)
    assert out.status == "invalid_answer"
    match = re.fullmatch(r"answer\.json is (\d+) bytes, over the 1000000-byte limit", out.error or "")
    assert match and 1_000_000 < int(match.group(1)) <= 8 * 1024**2
    assert "No space left on device" in out.stdout_tail
    assert max_rss_mb() - before < 30


@pytest.mark.parametrize("target", ["/etc/passwd", "/tmp/answer.json"])
def test_an_answer_symlinked_out_of_output_is_refused(
    reader: DockerBackend, refs: dict[str, ImageRef], task: Task, target: str
) -> None:
    script = """
    # A valid answer outside /output, then links to it (or to /etc/passwd) in place of the real files.
    json.dump({"response": "from outside"}, open("/tmp/answer.json", "w"))
    os.symlink(sys.argv[1], "/output/answer.json")
    os.symlink("/etc/passwd", "/output/queries.jsonl")
    """
    out = run_probe(reader, refs, task, script, target)
    assert (out.status, out.answer) == ("invalid_answer", None)
    assert out.error == f"answer.json is a symlink (to {target!r}), not a regular file"
    assert out.notes == ["queries.jsonl ignored: it is a symlink, not a regular file"]
    assert out.queries == []


# -- resources -------------------------------------------------------------------------------------------------


def test_100_mb_on_stdout_keeps_only_a_tail(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    line = b"y" * 1023 + b"\\n"
    for _ in range(100 * 1024):
        sys.stdout.buffer.write(line)
    sys.stdout.buffer.write(b"THE END\\n")
    sys.stdout.flush()
    sys.stderr.buffer.write(line * 10240)
    json.dump({"response": "loud"}, open("/output/answer.json", "w"))
    """
    before = max_rss_mb()
    out = run_probe(docker_backend, refs, task, script)
    assert out.status == "ok", out.error
    dropped = 100 * 1024 * 1024 + 8 - 16 * 1024
    assert out.stdout_tail.startswith(f"[… {dropped} earlier bytes dropped]\n")
    assert out.stdout_tail.endswith("THE END\n")
    assert len(out.stdout_tail.encode()) < 16 * 1024 + 64 and len(out.stderr_tail.encode()) < 16 * 1024 + 64
    assert max_rss_mb() - before < 30


def test_a_fork_bomb_hits_the_pids_limit_and_the_sample_still_ends(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
    started = time.monotonic()
    out = run_probe(docker_backend, refs, task, script, pids=32, time_limit_s=3)
    assert out.status == "timeout"
    assert "the pids limit of 32 was reached" in out.notes
    assert time.monotonic() - started < 15


ANSWER_THEN = """
    json.dump({"response": "done"}, open("/output/answer.json", "w"))
    """


def test_a_fork_bomb_that_stops_in_time_is_still_said(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = (
        ANSWER_THEN
        + """
    import time
    refused = 0
    for _ in range(200):
        try:
            if os.fork() == 0:
                time.sleep(1)
                os._exit(0)
        except OSError:
            refused += 1
    print(f"refused {refused}", file=sys.stderr)
    sys.exit(0)
    """
    )
    out = run_probe(docker_backend, refs, task, script, pids=32)
    assert (out.status, out.exit_code) == ("ok", 0), (out.error, out.stderr_tail)
    assert "refused 0" not in out.stderr_tail
    assert out.limits_reached == ["pids"]
    assert "the pids limit of 32 was reached" in out.notes


def test_a_child_killed_by_the_oom_killer_is_said_though_the_agent_exits_0(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = (
        ANSWER_THEN
        + """
    import subprocess
    hog = "hoard = []\\nwhile True: hoard.append(bytearray(4 << 20))"
    child = subprocess.run([sys.executable, "-c", hog])
    print(f"child {child.returncode}", file=sys.stderr)
    sys.exit(0)
    """
    )
    out = run_probe(docker_backend, refs, task, script, memory_bytes=64 * 1024**2)
    assert (out.status, out.exit_code, out.oom_killed) == ("ok", 0, False), (out.error, out.stderr_tail)
    assert "child -9" in out.stderr_tail
    assert out.limits_reached == ["memory"]


def test_a_full_output_is_said_though_the_agent_exits_0(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = (
        ANSWER_THEN
        + """
    try:
        with open("/output/filler", "wb") as f:
            while True:
                f.write(b"x" * 65536)
    except OSError as exc:
        print(f"filler {exc.errno}", file=sys.stderr)
    sys.exit(0)
    """
    )
    out = run_probe(docker_backend, refs, task, script)
    assert (out.status, out.exit_code) == ("ok", 0), (out.error, out.stderr_tail)
    assert "filler 28" in out.stderr_tail  # ENOSPC
    assert out.limits_reached == ["output"]


def test_a_quiet_sample_reaches_no_limit(docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task) -> None:
    out = run_probe(docker_backend, refs, task, ANSWER_THEN + "sys.exit(0)")
    assert (out.status, out.limits_reached) == ("ok", [])


def test_a_memory_bomb_is_killed_by_the_oom_killer(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    hoard = []
    while True:
        hoard.append(bytearray(4 << 20))
    """
    out = run_probe(docker_backend, refs, task, script, memory_bytes=64 * 1024**2)
    assert (out.status, out.oom_killed, out.exit_code) == ("oom", True, 137)
    assert out.error == "the agent was killed by the OOM killer (exit code 137); answer.json missing"


def test_sleeping_past_the_limit_is_a_timeout(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    started = time.monotonic()
    out = run_probe(docker_backend, refs, task, "import time; time.sleep(600)", time_limit_s=2)
    assert out.status == "timeout" and out.exit_code is None
    assert out.error == "the agent ran past the time limit of 2 s and was killed; answer.json missing"
    # Never stopped before the limit, and stopped long before the sleep ends. No ceiling of a second above the
    # limit: on a loaded machine the waiting thread may wake later than that.
    assert 2 <= out.timings.agent <= time.monotonic() - started < 15


def test_an_orphan_holding_stdout_does_not_hold_the_sample(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    import time
    if os.fork() == 0:
        time.sleep(600)  # keeps stdout and stderr open long after the agent is gone
    json.dump({"response": "done"}, open("/output/answer.json", "w"))
    """
    out = run_probe(docker_backend, refs, task, script, time_limit_s=10)
    assert out.status == "ok" and out.timings.agent < 3


def test_an_agent_that_closes_its_output_streams_is_still_waited_for(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    import time
    os.close(1)
    os.close(2)
    time.sleep(1.5)
    json.dump({"response": "still here"}, open("/output/answer.json", "w"))
    """
    out = run_probe(docker_backend, refs, task, script, time_limit_s=10)
    assert (out.status, out.exit_code) == ("ok", 0), out.error
    assert out.answer is not None and out.answer.response == "still here"
    assert 1.5 <= out.timings.agent < 3


# -- the file system -------------------------------------------------------------------------------------------


def test_the_world_cannot_be_written(docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task) -> None:
    script = """
    import sqlite3
    world = "/world/ispm-crossvendor-v1.sqlite"

    def overwrite():
        with open(world, "r+b") as f:
            f.write(b"SQLite format 4\\0")

    def sql_write():
        conn = sqlite3.connect(world)
        conn.execute("CREATE TABLE pwned (x)")
        conn.commit()

    attempt("overwrite", overwrite)
    attempt("sqlite write", sql_write)
    attempt("truncate", lambda: os.truncate(world, 0))
    attempt("unlink", lambda: os.unlink(world))
    attempt("rename", lambda: os.rename(world, "/world/moved"))
    attempt("chmod", lambda: os.chmod(world, 0o666))
    attempt("new file", lambda: open("/world/new.sqlite", "w").write("x"))
    finish()
    """
    before = hashlib.sha256(WORLD_FILE.read_bytes()).hexdigest()
    out = run_probe(docker_backend, refs, task, script)
    report = assert_attack_failed(out)
    assert len(report) == 7
    # Two layers refuse: the file is root's (0644) and the bind mount is read-only.
    assert all(
        re.search(r"Permission denied|Read-only file system|readonly|unable to open", v) for v in report.values()
    )
    assert hashlib.sha256(WORLD_FILE.read_bytes()).hexdigest() == before


def test_nothing_outside_output_and_tmp_is_writable(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    import stat, subprocess
    for path in ["/pwned", "/etc/pwned", "/home/agent/pwned", "/task/pwned", "/docs/pwned", "/var/tmp/pwned",
                 "/run/pwned", "/usr/local/bin/pwned", "/replay-pwned"]:
        attempt(f"create {path}", lambda p=path: open(p, "w").write("x"))
    for path in ["/etc/passwd", "/task/prompt.md", "/docs/overview.md", "/usr/local/bin/ispm-sql"]:
        attempt(f"append {path}", lambda p=path: open(p, "a").write("x"))
    attempt("allowed:/tmp", lambda: open("/tmp/scratch", "w").write("x"))
    attempt("allowed:/output", lambda: open("/output/scratch", "w").write("x"))

    def exec_from_tmp():
        open("/tmp/run.sh", "w").write("#!/bin/sh\\necho ran\\n")
        os.chmod("/tmp/run.sh", 0o755)
        subprocess.run(["/tmp/run.sh"], check=True)

    attempt("exec from /tmp", exec_from_tmp)
    finish()
    """
    report = assert_attack_failed(run_probe(docker_backend, refs, task, script))
    assert report["allowed:/tmp"] == "ok" and report["allowed:/output"] == "ok"
    assert "Read-only file system" in report["create /pwned"] and "Permission denied" in report["append /etc/passwd"]
    assert "Permission denied" in report["exec from /tmp"]
    assert len(report) == 16


@pytest.mark.parametrize("image", [spec.name for spec in SPECS])
def test_no_setuid_or_setgid_file_in_any_image(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task, image: str
) -> None:
    # CIS Docker Benchmark 4.8: none gains the agent anything (no capabilities, NoNewPrivs), but none is needed.
    # find runs as the agent, in a real sample of each shipped image; -xdev keeps it on the image's own files.
    script = """
    import subprocess
    found = subprocess.run(["find", "/", "-xdev", "-perm", "/6000"], capture_output=True, text=True)
    results["allowed:uid"] = str(os.getuid())
    results["allowed:found"] = json.dumps(found.stdout.split())
    # What find could not read: root's and _apt's own folders, which the agent cannot enter (nothing in them runs).
    closed = [line.split("‘", 1)[1].split("’", 1)[0] for line in found.stderr.splitlines()]
    modes = {path: [os.stat(path).st_uid, oct(os.stat(path).st_mode & 0o7777)] for path in closed}
    results["allowed:closed"] = json.dumps(modes)
    results["allowed:lines"] = json.dumps([found.returncode, len(found.stderr.splitlines())])
    results["setuid or setgid file"] = "ok" if found.stdout.strip() else "none found"
    finish()
    """
    report = assert_attack_failed(run_probe(docker_backend, refs, task, script, image=refs[image].tag))
    assert report["allowed:uid"] == "10001"
    assert json.loads(report["allowed:found"]) == []
    closed = json.loads(report["allowed:closed"])
    returncode, lines = json.loads(report["allowed:lines"])
    assert returncode in (0, 1) and lines == len(closed)  # every complaint is an unreadable folder, and no other
    assert all(uid != 10001 and int(mode, 8) & 0o001 == 0 for uid, mode in closed.values()), closed


# -- the network -----------------------------------------------------------------------------------------------


def _own_address() -> str | None:
    # This host's address on its default route: connecting a UDP socket picks it and sends nothing.
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        return str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()


def test_no_outside_address_is_reachable(docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task) -> None:
    # "Outside" is anything beyond the container's loopback; the targets are this machine's own interface
    # address and a name lookup. No packet can leave a network-less container, whatever the target.
    own = _own_address()
    witnesses = [TcpWitness(own)] if own and not own.startswith("127.") else []
    targets = [[w.host, w.port] for w in witnesses]
    script = CONNECT + textwrap.dedent(
        """
        def udp(host):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"x", (host, 53))
        for host, _ in targets:
            attempt(f"udp {host}:53", lambda h=host: udp(h))
        attempt("dns example.com", lambda: socket.getaddrinfo("example.com", 443))

        def interfaces():
            # Reported as a failure whatever it finds, so the test can read the list.
            raise OSError(f"interfaces {sorted(os.listdir('/sys/class/net'))}")
        attempt("interfaces", interfaces)
        finish()
        """
    )
    try:
        report = assert_attack_failed(run_probe(docker_backend, refs, task, script, json.dumps(targets)))
        for host, port in targets:
            assert "Network is unreachable" in report[f"tcp {host}:{port}"]
            assert "Network is unreachable" in report[f"udp {host}:53"]
        assert "gaierror" in report["dns example.com"]
        assert report["interfaces"] == "OSError: interfaces ['lo']"
        assert all(w.accepted == 0 for w in witnesses)
        assert len(report) == 2 * len(targets) + 2
    finally:
        for witness in witnesses:
            witness.close()


def test_the_host_bridge_is_unreachable(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task, bridge_ip: str
) -> None:
    on_bridge, on_loopback = TcpWitness(bridge_ip), TcpWitness("127.0.0.1")
    try:
        # The loopback witness's port, tried on the container's loopback: a different network namespace.
        targets = [[bridge_ip, on_bridge.port], ["127.0.0.1", on_loopback.port], [bridge_ip, 2375], [bridge_ip, 22]]
        report = assert_attack_failed(
            run_probe(docker_backend, refs, task, CONNECT + "finish()\n", json.dumps(targets))
        )
        assert "Network is unreachable" in report[f"tcp {bridge_ip}:{on_bridge.port}"]
        assert "Connection refused" in report[f"tcp 127.0.0.1:{on_loopback.port}"]
        assert (on_bridge.accepted, on_loopback.accepted) == (0, 0)
    finally:
        on_bridge.close()
        on_loopback.close()


def test_a_concurrent_sample_is_unreachable(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task, bridge_ip: str
) -> None:
    listener = """
    import time
    server = socket.create_server(("0.0.0.0", 4444))
    server.settimeout(0.2)
    open("/output/listening", "w").close()
    accepted, deadline = 0, time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            server.accept()[0].close()
            accepted += 1
        except TimeoutError:
            pass
    results["accepted"] = str(accepted)
    finish()
    """
    prefix = bridge_ip.rsplit(".", 1)[0]
    targets = [["127.0.0.1", 4444]] + [[f"{prefix}.{i}", 4444] for i in range(2, 6)]
    outputs: dict[str, SampleOutput] = {}
    threads = [
        threading.Thread(target=lambda: outputs.update(a=run_probe(docker_backend, refs, task, listener))),
        threading.Thread(
            target=lambda: outputs.update(
                b=run_probe(docker_backend, refs, task, CONNECT + "finish()\n", json.dumps(targets))
            )
        ),
    ]
    threads[0].start()
    time.sleep(1.5)  # the listener is up well within this
    threads[1].start()
    for thread in threads:
        thread.join(30)
    assert attempts(outputs["a"]) == {"accepted": "0"}
    report = assert_attack_failed(outputs["b"])
    assert "Connection refused" in report["tcp 127.0.0.1:4444"]
    assert all("Network is unreachable" in report[f"tcp {prefix}.{i}:4444"] for i in range(2, 6))


def test_no_host_path_of_the_user_or_the_runner_is_visible(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task, tmp_path: Path
) -> None:
    # The world, docs, task, replay recordings and tools reach the container from a fixed neutral folder under
    # random names: what the mount table shows names neither the checkout, nor the run, nor the runner's process.
    run_dir = tmp_path / "runs" / "alices-secret-run"
    (run_dir / "replay").mkdir(parents=True)
    (run_dir / "replay" / f"{task.id}.json").write_text("{}")
    script = """
    results["allowed:mountinfo"] = open("/proc/self/mountinfo").read()
    results["allowed:replay"] = json.dumps(sorted(os.listdir("/replay")))
    results["allowed:world"] = json.dumps(sorted(os.listdir("/world")))
    results["allowed:docs"] = json.dumps(len(os.listdir("/docs")))
    finish()
    """
    out = run_probe(docker_backend, refs, task, script, replay_dir=run_dir / "replay")
    assert (out.status, out.exit_code) == ("agent_error", 1), (out.status, out.error, out.stderr_tail)
    report = attempts(out)
    assert json.loads(report["allowed:replay"]) == [f"{task.id}.json"]
    assert json.loads(report["allowed:world"]) == [WORLD_FILE.name]
    assert json.loads(report["allowed:docs"]) == len(list((world_dir() / "docs").iterdir()))
    # Every path a mount names: its root in the source file system, its mount point and its source.
    lines = [line.split() for line in report["allowed:mountinfo"].splitlines()]
    paths = [field for fields in lines for field in (fields[3], fields[4], fields[fields.index("-") + 2])]
    assert "/task" in [fields[4] for fields in lines]  # the table is the sample's own
    checkout = str(Path(__file__).resolve().parents[1])
    pid, start = str(os.getpid()), Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19]
    leaks = [
        p
        for p in paths
        if checkout in p
        or "alices-secret-run" in p
        or str(tmp_path) in p
        or {pid, start} & set(re.split(r"[/._-]", p))  # the runner's pid or start time as a name's part
    ]
    assert leaks == []


def test_the_docker_socket_is_absent(docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task) -> None:
    script = """
    def connect(path):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
    for path in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
                 "/var/run/docker/containerd/containerd.sock", "/run/docker/plugins"]:
        attempt(f"unix {path}", lambda p=path: connect(p))
    attempt("tcp engine", lambda: socket.create_connection(("127.0.0.1", 2375), timeout=1))
    finish()
    """
    report = assert_attack_failed(run_probe(docker_backend, refs, task, script))
    assert all("FileNotFoundError" in v for k, v in report.items() if k.startswith("unix"))


# -- what the agent must never see -----------------------------------------------------------------------------


SEARCH = """
import base64, subprocess, zlib

# Compressed and split over several arguments: one argv string is capped at 128 KiB. Arguments live only in
# /proc, which the search skips; the encoded form would not match a needle anyway.
needles = json.loads(zlib.decompress(base64.b64decode("".join(sys.argv[1:]))))

def grep(patterns, paths):
    done = subprocess.run(["grep", "-rFlas", "-f", "-", "--", *paths], input="\\n".join(patterns).encode(),
                          stdout=subprocess.PIPE)
    return sorted(done.stdout.decode().split("\\n")[:-1])

# Everything but the kernel's views and the world; /bin, /lib and friends are links into /usr.
roots = [os.path.join("/", n) for n in sorted(os.listdir("/"))
         if n not in ("proc", "sys", "dev", "world") and not os.path.islink(os.path.join("/", n))]
roots.append("/dev/shm")
hits = grep(needles["secret"], roots)
world_hits = grep(needles["world_safe"], ["/world"])
env_hits = [k for k, v in os.environ.items() if any(n in v for n in needles["secret"])]
control = grep([needles["control"]], roots)
results["searched"] = json.dumps(roots)
results["secret in files"] = json.dumps(hits) if hits else "none found"
results["witness in world"] = json.dumps(world_hits) if world_hits else "none found"
results["secret in env"] = json.dumps(env_hits) if env_hits else "none found"
results["allowed:control"] = json.dumps(control)
for name in ("secret in files", "witness in world", "secret in env"):
    if results[name] != "none found":
        results[name] = "ok"  # found: the attack succeeded
finish()
"""


@pytest.fixture(scope="module")
def ground_truth() -> GroundTruth:
    published = tasks_dir() / GROUND_TRUTH_NAME
    if published.is_file():
        return load_ground_truth(published)
    from runner.tasks.catalog import derive_all

    return derive_all(tasks_dir(), world_dir())


def test_no_witness_sql_or_ground_truth_anywhere_in_the_container(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], tasks: list[Task], task: Task, ground_truth: GroundTruth
) -> None:
    # What the agent may legitimately see: every prompt, the docs, our tools. A needle found there is no leak.
    visible = "\n".join(
        [t.prompt for t in tasks]
        + [p.read_text() for p in sorted((world_dir() / "docs").glob("*.md"))]
        + [p.read_text() for p in sorted((Path(__file__).parents[1] / "images").rglob("*")) if p.is_file()]
    )
    witness = {
        line.strip()
        for t in tasks
        for sql in (t.witness_sql, t.dual_sql)
        for line in sql.splitlines()
        if len(line.strip()) >= 24 and line.strip() not in visible
    }
    # Short or all-digit identifiers would match by chance in binaries; the distinctive ones make the case.
    identifiers = {
        e.identifier
        for truth in ground_truth.tasks.values()
        for e in truth.entities
        if len(e.identifier) >= 10 and not e.identifier.isdigit() and e.identifier not in visible
    }
    digests = {ground_truth.ground_truth_digest, ground_truth.task_set_digest}
    secret = sorted(witness | identifiers | digests)
    assert len(witness) > 100 and len(identifiers) > 100
    control = task.prompt.strip().splitlines()[0]
    needles = {"secret": secret, "world_safe": sorted(witness | digests), "control": control}
    encoded = base64.b64encode(zlib.compress(json.dumps(needles).encode(), 9)).decode()
    parts = [encoded[i : i + 100_000] for i in range(0, len(encoded), 100_000)]

    out = run_probe(docker_backend, refs, task, SEARCH, *parts, time_limit_s=60)
    report = assert_attack_failed(out)
    assert "/usr" in json.loads(report["searched"]) and "/task" in json.loads(report["searched"])
    assert report["secret in files"] == "none found"
    assert report["witness in world"] == "none found"
    assert report["secret in env"] == "none found"
    # The search works: the prompt's first line is found where it belongs.
    assert json.loads(report["allowed:control"]) == ["/task/prompt.md"]


# -- and the runner carries on ---------------------------------------------------------------------------------


def test_the_runner_carries_on_and_leaves_nothing(
    docker_backend: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    spec = SampleSpec(task_id=task.id, run_id=RUN, image=refs["agent-null"].tag, task_files=agent_files(task))
    assert docker_backend.run_sample(spec).status == "ok"
    client = docker.from_env()
    try:
        wanted = {"label": [f"{LABEL_RUN}={RUN}"]}
        assert client.api.containers(all=True, filters=wanted) == []
        assert (client.api.volumes(filters=wanted).get("Volumes") or []) == []
    finally:
        client.close()


# -- what keeps the sample alive -------------------------------------------------------------------------------


def test_pid_1_and_the_keeper_are_out_of_the_agents_reach(
    reader: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    # Held layout: pid 1 is the execute-only init, of the agent's own uid. Keeper layout: the init and the
    # keeper run as nobody. Either way nothing the agent does may stop, trace or read them.
    script = """
    import ctypes, signal, time
    libc = ctypes.CDLL(None, use_errno=True)

    def ptrace(request, pid):
        if libc.ptrace(request, pid, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    def alive(pid):
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state not in ("T", "t", "Z", "X")

    others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    for pid in others:
        attempt(f"ptrace attach {pid}", lambda p=pid: ptrace(16, p))
        attempt(f"ptrace seize {pid}", lambda p=pid: ptrace(0x4206, p))
        attempt(f"read /proc/{pid}/mem", lambda p=pid: open(f"/proc/{p}/mem", "rb").read(1))
        attempt(f"read /proc/{pid}/environ", lambda p=pid: open(f"/proc/{p}/environ", "rb").read(1))
    for pid in others:
        for sig in (signal.SIGSTOP, signal.SIGSEGV, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    time.sleep(0.3)

    def survived(pid):
        if not alive(pid):
            return  # stopped or killed: the attack worked
        raise OSError(f"pid {pid} still runs")

    for pid in others:
        attempt(f"stop or kill {pid}", lambda p=pid: survived(p))
    results["allowed:others"] = json.dumps(others)
    finish()
    """
    report = assert_attack_failed(run_probe(reader, refs, task, script))
    others = json.loads(report["allowed:others"])
    assert 1 in others
    assert all(
        re.search(r"Operation not permitted|Permission denied", report[f"ptrace attach {pid}"]) for pid in others
    )
    assert all("still runs" in report[f"stop or kill {pid}"] for pid in others)


def test_an_agent_that_kills_every_process_it_may_still_has_its_output_collected(
    reader: DockerBackend, refs: dict[str, ImageRef], task: Task
) -> None:
    script = """
    import signal, time
    json.dump({"response": "written before the massacre"}, open("/output/answer.json", "w"))
    for _ in range(3):
        if os.fork() == 0:
            time.sleep(60)
    try:
        os.kill(-1, signal.SIGKILL)  # every process this uid may signal but pid 1 and itself
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
    """
    out = run_probe(reader, refs, task, script, time_limit_s=10)
    assert (out.status, out.exit_code, out.oom_killed) == ("agent_error", 137, False), (out.error, out.stderr_tail)
    assert out.answer is not None and out.answer.response == "written before the massacre"
    assert out.timings.agent < 5
