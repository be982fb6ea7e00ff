"""A submission cancelled while its run is running: the run stops, its containers go, and nothing is published.

The board's worker runs in this process on a real Docker engine. The agent sleeps for ten minutes on every task, so
the cancel lands while its samples run. The cancel is the API's (``runner.board.worker.cancel`` with the
submitter's token); the worker's heartbeat sees it and stops the run the way Ctrl-C does.

The stop request itself is also checked on the scheduler alone, with an in-process sample runner whose samples
block until they are swept or let go: a stop sweeps and journals its reason; a hands-off stop (a worker that lost
its lease) sweeps nothing and journals nothing more, even for samples that end after it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import docker
import pytest
from board_fixtures import add_submission, board_in_process, board_tag, contract_image
from docker_fixtures import containers_of
from fake_provider import FakeProvider, Reply, openai_completion

from runner.board.db import Submission
from runner.board.worker import PUBLISHED_DIR, cancel, work_one
from runner.contract import SampleOutput
from runner.grading.rubric import load_rubrics
from runner.paths import tasks_dir, world_dir
from runner.pipeline import make_judges
from runner.record.model import RunRecord
from runner.run.calibration import calibration_spec
from runner.run.journal import Journal, RunInterrupted, RunStarted, SampleFinished, SampleGraded, read_entries
from runner.run.scheduler import RanSample, RunPlan, StopRequest, execute
from runner.sandbox.backend import SampleSpec
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
    """Stands in for where samples run: each sample blocks until the run is swept or the test lets it go."""

    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.swept: list[str] = []
        self.let_go = threading.Event()

    def run_sample(self, spec: SampleSpec, *, with_gateway: bool) -> RanSample:
        self.started.release()
        self.let_go.wait(60)
        output = SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="sandbox_error", error="ended")
        return RanSample(output, None)

    def sweep(self, run_id: str) -> None:
        self.swept.append(run_id)
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
            tasks={t: BY_ID[t] for t in TASKS}, truths=TRUTH, backend=None,  # type: ignore[arg-type]
            judges=make_judges(spec.judges, load_rubrics()), world_file=world_dir() / SNAPSHOT_NAME,
            journal=journal, runner=runner,
        )  # fmt: skip
        run = threading.Thread(target=lambda: ended.append(execute(plan, stop=stop)))
        run.start()
        assert runner.started.acquire(timeout=30) and runner.started.acquire(timeout=30)  # both units busy
        stop.stop("cancelled on board b: cancelled by the submitter", hands_off=hands_off)
        if hands_off:
            time.sleep(1.0)  # the run has seen the stop; its samples end later, at their own limit
            runner.let_go.set()
        run.join(timeout=60)
        assert not run.is_alive()
    assert ended[0][0] == "interrupted"
    entries = read_entries(journal_path)
    if hands_off:
        # Nothing swept (the run is another worker's now), and nothing journaled, not even the samples that ended.
        assert (runner.swept, entries) == ([], [])
    else:
        assert runner.swept == ["r-stop"]
        assert [type(e) for e in entries] == [RunInterrupted]
        assert entries[0].reason == "cancelled on board b: cancelled by the submitter"  # type: ignore[union-attr]
    assert runner.started.acquire(timeout=0.5) is False  # the third task never started
