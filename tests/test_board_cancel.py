"""A submission cancelled while its run is running: the run stops, its containers go, and nothing is published.

The board's worker runs in this process on a real Docker engine. The agent sleeps for ten minutes on every task, so
the cancel lands while its samples run. The cancel is the API's (``runner.board.cancel.cancel`` with the
submitter's token); the worker's heartbeat sees it and stops the run the way Ctrl-C does.

The stop request itself is also checked on the scheduler alone, with an in-process sample runner whose samples
block until they are swept: a stop sweeps the run and journals its reason; a hands-off stop (a worker that lost its
lease) sweeps only its own attempt's sandboxes and journals nothing more, even for samples that end after it. On the
real engine, two attempts at one run (the stale worker's and the new holder's, in one process: same run id, same
owner) each have a sample running; the stale one's hands-off stop removes its own container at once and leaves the
new holder's running.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import pytest
from board_fixtures import add_submission, board_in_process, board_tag, contract_image
from docker_fixtures import containers_of
from fake_provider import FakeProvider, Reply, openai_completion

from runner.board.cancel import cancel
from runner.board.context import PUBLISHED_DIR
from runner.board.db import Submission
from runner.board.worker import work_one
from runner.contract import SampleOutput
from runner.grading.rubric import load_rubrics
from runner.paths import tasks_dir, world_dir
from runner.pipeline import make_judges
from runner.record.model import RunRecord
from runner.run.calibration import calibration_spec
from runner.run.journal import Journal, RunInterrupted, RunStarted, SampleFinished, SampleGraded, read_entries
from runner.run.sample_runner import HostRunner, RanSample
from runner.run.scheduler import RunPlan, StopRequest, execute
from runner.sandbox.backend import LABEL_ATTEMPT, SampleSpec
from runner.sandbox.docker import DockerBackend
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth
from runner.world import SNAPSHOT_NAME

TASKS = ["ispm-002", "ispm-003", "ispm-004"]
TRUTH = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
BY_ID = {t.id: t for t in load_tasks(tasks_dir())}


@pytest.fixture(scope="module")
def sleeping_image(refs: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    context = tmp_path_factory.mktemp("sleeping")
    return contract_image(refs["base"].tag, context, "ispm-test/sleeping-agent:latest", "import time; time.sleep(600)")


def _wait(what: str, until: Any, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := until()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return found


def _running(run_id: str) -> list[str]:
    client = docker.from_env()
    try:
        found = client.api.containers(filters={"label": f"ispm.run={run_id}", "status": "running"})
        return [c["Id"] for c in found]
    finally:
        client.close()


@pytest.mark.docker
@pytest.mark.slow
def test_a_running_submission_cancelled_stops_its_run_and_leaves_nothing(
    sleeping_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider() as candidate:
        candidate.push(Reply(body=openai_completion("ok", model="cand-1")))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-board-cancel")
        monkeypatch.setenv("OPENAI_BASE_URL", candidate.openai_base)
        ctx = board_in_process(
            tmp_path / "data", board_id="cancel-board", candidates=["openai/cand"], lease_s=30, heartbeat_s=0.5,
            trial={"tasks": TASKS, "epochs": 1, "calibration": "replay"},
        )  # fmt: skip
        tag = board_tag(sleeping_image, "submission-cancel")
        sub_id = add_submission(ctx, tag, state="queued")
        worked: list[bool] = []
        worker = threading.Thread(target=lambda: worked.append(work_one(ctx, "cancel-board/w0")))
        worker.start()
        try:
            journal = tmp_path / "data" / "runs" / f"submission-{sub_id}" / "journal.jsonl"
            started = _wait("the run to start", lambda: journal.is_file() and read_entries(journal))
            run_id = next(e.run_id for e in started if isinstance(e, RunStarted))
            running = _wait("its samples to run", lambda: _running(run_id))
            with ctx.sessions() as session:
                token_id = session.get_one(Submission, sub_id).token_id
            shown = cancel(ctx, sub_id, token_id=token_id, reason="cancelled by the submitter")
            assert (shown.state, shown.worker) == ("cancelled", "cancel-board/w0")  # its worker stops the run
        finally:
            worker.join(timeout=120)
        assert not worker.is_alive() and worked == [True]
    assert running  # the cancel came while samples ran
    with ctx.sessions() as session:
        row = session.get_one(Submission, sub_id)
    assert (row.state, row.reason, row.worker, row.lease_until, row.run_id) == (
        "cancelled", "cancelled by the submitter", None, None, None,
    )  # fmt: skip
    assert containers_of(run_id) == []
    entries = read_entries(journal)
    assert [type(e) for e in entries] == [RunStarted, RunInterrupted]
    assert not any(isinstance(e, SampleFinished | SampleGraded) for e in entries)
    stop = entries[-1]
    assert (
        isinstance(stop, RunInterrupted)
        and stop.reason == "cancelled on board cancel-board: cancelled by the submitter"
    )
    record = RunRecord.model_validate_json((journal.parent / "record.json").read_text(encoding="utf-8"))
    assert (record.status, record.samples_graded, record.scores) == ("incomplete", 0, None)
    assert not (tmp_path / "data" / PUBLISHED_DIR).exists() or list((tmp_path / "data" / PUBLISHED_DIR).iterdir()) == []
    client = docker.from_env()
    try:
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(tag)  # the board's tag went with the run; the image it tagged is the test's
    finally:
        client.close()
    ctx.engine.dispose()


class BlockingRunner:
    """Stands in for where samples run: each sample blocks until the run (or its attempt) is swept."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.attempts: set[str | None] = set()
        self.swept: list[tuple[str, str | None]] = []
        self.let_go = threading.Event()

    def run_sample(self, spec: SampleSpec) -> RanSample:
        self.attempts.add(spec.attempt)
        self.started.release()
        self.let_go.wait(60)
        output = SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="sandbox_error", error="ended")
        return RanSample(output=output)

    def sweep(self, run_id: str, *, attempt: str | None = None) -> None:
        self.swept.append((run_id, attempt))
        self.let_go.set()  # removing the containers ends the samples


@pytest.mark.parametrize("hands_off", [False, True])
def test_a_stop_request_ends_the_run_like_ctrl_c_or_hands_off(tmp_path: Path, hands_off: bool) -> None:
    spec = calibration_spec("replay", epochs=1, concurrency=2, tasks=TASKS)
    runner = BlockingRunner()
    stop = StopRequest()
    journal_path = tmp_path / "journal.jsonl"
    ended: list[tuple[str, float]] = []
    with Journal(journal_path) as journal:
        plan = RunPlan(
            run_id="r-stop", spec=spec, image="ispm/agent-replay:x",
            tasks={t: BY_ID[t] for t in TASKS}, truths=TRUTH, runner=runner,
            judges=make_judges(spec.judges, load_rubrics()), world_file=world_dir() / SNAPSHOT_NAME,
            journal=journal,
        )  # fmt: skip
        run = threading.Thread(target=lambda: ended.append(execute(plan, stop=stop)))
        run.start()
        assert runner.started.acquire(timeout=30) and runner.started.acquire(timeout=30)  # both units busy
        stop.stop("cancelled on board b: cancelled by the submitter", hands_off=hands_off)
        run.join(timeout=60)
        assert not run.is_alive()
    assert ended[0][0] == "interrupted"
    entries = read_entries(journal_path)
    (attempt,) = runner.attempts  # one attempt, on every sample's spec
    assert attempt
    if hands_off:
        # Only this attempt's sandboxes swept (the run is another worker's now, and so are the sandboxes of its
        # attempt), and nothing journaled, not even the samples that the sweep ended after the stop.
        assert (runner.swept, entries) == ([("r-stop", attempt)], [])
    else:
        assert runner.swept == [("r-stop", None)]
        assert [type(e) for e in entries] == [RunInterrupted]
        assert entries[0].reason == "cancelled on board b: cancelled by the submitter"  # type: ignore[union-attr]
    assert runner.started.acquire(timeout=0.5) is False  # the third task never started


def _running_by_attempt(run_id: str) -> dict[str, list[str]]:
    """The running containers of ``run_id``, by their ``ispm.attempt`` label."""
    client = docker.from_env()
    try:
        found = client.api.containers(filters={"label": f"ispm.run={run_id}", "status": "running"})
    finally:
        client.close()
    by_attempt: dict[str, list[str]] = {}
    for container in found:
        by_attempt.setdefault((container.get("Labels") or {}).get(LABEL_ATTEMPT, ""), []).append(container["Id"])
    return by_attempt


def _volumes_of(attempt: str) -> list[str]:
    client = docker.from_env()
    try:
        return [v["Name"] for v in client.api.volumes(filters={"label": f"{LABEL_ATTEMPT}={attempt}"})["Volumes"] or []]
    finally:
        client.close()


@pytest.mark.docker
def test_a_hands_off_stop_ends_its_own_attempts_sandboxes_and_spares_the_new_holders(
    sleeping_image: str, tmp_path: Path
) -> None:
    run_id = f"r-two-attempts-{uuid.uuid4().hex[:8]}"
    spec = calibration_spec("replay", epochs=1, concurrency=1, tasks=TASKS[:1])
    stops = {"stale": StopRequest(), "holder": StopRequest()}
    ended: dict[str, tuple[str, float]] = {}
    threads: dict[str, threading.Thread] = {}
    backend = DockerBackend(sweep_on_start=False)

    def start(name: str, journal: Journal) -> None:
        plan = RunPlan(
            run_id=run_id, spec=spec, image=sleeping_image, tasks={t: BY_ID[t] for t in TASKS[:1]}, truths=TRUTH,
            runner=HostRunner(backend), judges=make_judges(spec.judges, load_rubrics()), world_file=world_dir() / SNAPSHOT_NAME,
            journal=journal,
        )  # fmt: skip
        threads[name] = threading.Thread(target=lambda: ended.update({name: execute(plan, stop=stops[name])}))
        threads[name].start()

    with Journal(tmp_path / "stale.jsonl") as stale_journal, Journal(tmp_path / "holder.jsonl") as holder_journal:
        try:
            # The stale worker's attempt is mid-sample; then the new holder resumes the same run in the same process
            # (same run id, same owner label) and its sample runs too.
            start("stale", stale_journal)
            (stale,) = _wait("the stale attempt's sample to run", lambda: _running_by_attempt(run_id))
            start("holder", holder_journal)
            both = _wait("the new holder's sample to run", lambda: len(r := _running_by_attempt(run_id)) == 2 and r)
            (holder,) = set(both) - {stale}
            assert stale and holder and _volumes_of(stale) and _volumes_of(holder)

            stopped = time.monotonic()
            stops["stale"].stop("the board worker b/w0 lost its lease to another worker", hands_off=True)
            threads["stale"].join(timeout=60)
            assert not threads["stale"].is_alive() and ended["stale"][0] == "interrupted"
            took_s = time.monotonic() - stopped
            # The stale attempt's container and volume are gone at once (its agent would sleep for ten minutes);
            # the new holder's, with the same run id and owner, still run.
            assert took_s < 30, took_s
            assert _running_by_attempt(run_id) == {holder: both[holder]}
            assert containers_of(run_id) == both[holder] and _volumes_of(stale) == [] and _volumes_of(holder)

            stops["holder"].stop("cancelled on board b: cancelled by the submitter")  # its own stop: the whole run
            threads["holder"].join(timeout=60)
            assert not threads["holder"].is_alive() and ended["holder"][0] == "interrupted"
        finally:
            for name, thread in threads.items():
                stops[name].stop("test over")
                thread.join(timeout=60)
            backend.sweep(run_id)
            backend.close()
    assert containers_of(run_id) == []
    assert read_entries(tmp_path / "stale.jsonl") == []  # hands-off: nothing journaled, not even the sample it ended
    assert [type(e) for e in read_entries(tmp_path / "holder.jsonl")] == [RunInterrupted]
