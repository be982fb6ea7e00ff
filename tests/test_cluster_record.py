"""What the ``ray`` backend adds to a run, without a cluster: node checks, where samples ran, lost and duplicate
attempts in the journal and the record, and official runs on a cluster.

The scheduler runs here with an in-process :class:`~runner.run.sample_runner.SampleRunner` standing in for the cluster;
the real cluster is tests/test_cluster.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from runner.cluster.model import NodeCheck, NodeExpectations
from runner.contract import Answer, SampleOutput
from runner.grading.reference_judge import gold_answer
from runner.grading.rubric import load_rubrics
from runner.paths import tasks_dir, world_dir
from runner.pipeline import RunResult, make_judges
from runner.record.build import build_record
from runner.record.model import LeftOutNode
from runner.record.report import render_report
from runner.run.calibration import calibration_spec
from runner.run.digests import current_digests
from runner.run.journal import (
    JOURNAL_NAME,
    Journal,
    NodeLeftOut,
    RunStarted,
    SampleAttempt,
    SampleFinished,
    read_entries,
)
from runner.run.sample_runner import RanSample
from runner.run.scheduler import RunPlan, execute
from runner.run.spec import RunError, RunSpec, official
from runner.sandbox.backend import SampleSpec
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth
from runner.world import SNAPSHOT_NAME

TASKS = ["ispm-001", "ispm-002", "ispm-003"]
TRUTH = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
BY_ID = {t.id: t for t in load_tasks(tasks_dir())}
EXPECTED = NodeExpectations(
    runner_version="0.1.0",
    world_logical="w",
    task_set="t",
    ground_truth="g",
    images={"ispm/agent:1": "sha256:aa"},
    candidate_model="cand-2026",
)


def _check(**update: object) -> NodeCheck:
    same = NodeCheck(
        node="n" * 56,
        host="h1",
        runner_version="0.1.0",
        world_logical="w",
        task_set="t",
        ground_truth="g",
        images={"ispm/agent:1": "sha256:aa"},
    )
    return same.model_copy(update=update)


@pytest.mark.parametrize(
    ("found", "refusals", "missing"),
    [
        (_check(), [], []),
        (_check(images={"ispm/agent:1": None}), [], ["ispm/agent:1"]),
        (_check(images={}), [], ["ispm/agent:1"]),
        (
            _check(images={"ispm/agent:1": "sha256:bb"}),
            [
                "node nnnnnnnnnnnn (h1): image ispm/agent:1 is sha256:bb, run_started recorded sha256:aa; it is never rebuilt there"
            ],
            [],
        ),
        (_check(runner_version="0.2.0"), ["node nnnnnnnnnnnn (h1): ispm version is 0.2.0, the driver's is 0.1.0"], []),
        (_check(task_set="x"), ["node nnnnnnnnnnnn (h1): task set digest is x, the driver's is t"], []),
        (
            _check(world_logical=None, world_error="tampered"),
            [
                "node nnnnnnnnnnnn (h1): world logical digest is None, the driver's is w",
                "node nnnnnnnnnnnn (h1): its world does not verify: tampered",
            ],
            [],
        ),
        (
            _check(gateway_error="OPENAI_API_KEY is not set"),
            ["node nnnnnnnnnnnn (h1): its model gateway cannot start: OPENAI_API_KEY is not set"],
            [],
        ),
        (
            _check(images={}, engine_error="cannot reach the Docker engine: refused"),
            ["node nnnnnnnnnnnn (h1): its Docker engine cannot be reached: cannot reach the Docker engine: refused"],
            [],  # nothing to ship to
        ),
        (
            _check(probe_error="openai/cand: http://127.0.0.1:9/v1 rejected the key (HTTP 401)"),
            [
                "node nnnnnnnnnnnn (h1): its probe of the candidate failed: "
                "openai/cand: http://127.0.0.1:9/v1 rejected the key (HTTP 401)"
            ],
            [],
        ),
        (_check(candidate_model="cand-2026"), [], []),
        (
            _check(candidate_model="cand-2027"),
            [
                "node nnnnnnnnnnnn (h1): its provider returned model 'cand-2027' for the candidate, run_started "
                "recorded 'cand-2026'"
            ],
            [],
        ),
    ],
)
def test_a_node_check_names_every_refusal_and_every_missing_image(
    found: NodeCheck, refusals: list[str], missing: list[str]
) -> None:
    assert found.refusals(EXPECTED) == refusals
    assert found.missing(EXPECTED) == missing


def test_official_runs_are_allowed_on_the_cluster_and_keep_the_v1_lock() -> None:
    v1 = RunSpec(agent_image="me/agent:1", candidate="openai/x", judges=("a/j1", "b/j2"), backend="ray")
    assert official(v1, current_digests()).official
    with pytest.raises(RunError, match="concurrency is 8; v1 fixes it at 2"):
        official(v1.model_copy(update={"concurrency": 8}), current_digests())


class FlakyCluster:
    """Answers gold in-process; the first attempt at ``ispm-002`` is lost with node ``n-dead``."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.swept: list[str] = []
        self._lock = threading.Lock()

    def run_sample(self, spec: SampleSpec) -> RanSample:
        with self._lock:
            self.ran.append(spec.sample_id)
        task = BY_ID[spec.task_id]
        output = SampleOutput(
            task_id=spec.task_id, epoch=spec.epoch, status="ok", answer=gold_answer(task, TRUTH[task.id])
        )
        lost = (SampleAttempt(node="n-dead", outcome="lost", detail="NodeDiedError"),)
        return RanSample(output=output, node="n-live", lost_tries=lost if spec.task_id == "ispm-002" else ())

    def sweep(self, run_id: str, *, attempt: str | None = None) -> None:
        self.swept.append(run_id)


def _run(tmp_path: Path, cluster: FlakyCluster) -> Path:
    spec = calibration_spec("replay", epochs=1, concurrency=2, tasks=TASKS).model_copy(update={"backend": "ray"})
    digests = current_digests()
    folder = tmp_path / "run"
    with Journal(folder / JOURNAL_NAME) as journal:
        journal.append(RunStarted(run_id="r1", spec=spec, digests=digests, runner_version="0.1.0"))
        plan = RunPlan(
            run_id="r1",
            spec=spec,
            image="ispm/agent-replay:x",
            tasks={t: BY_ID[t] for t in TASKS},
            truths=TRUTH,
            judges=make_judges(spec.judges, load_rubrics()),
            world_file=world_dir() / SNAPSHOT_NAME,
            journal=journal,
            runner=cluster,
        )
        assert execute(plan)[0] == "completed"
    return folder


def test_the_journal_and_record_name_each_samples_node_and_its_lost_attempts(tmp_path: Path) -> None:
    cluster = FlakyCluster()
    folder = _run(tmp_path, cluster)
    assert sorted(cluster.ran) == [f"{t}.e1" for t in TASKS]
    record = build_record(read_entries(folder / JOURNAL_NAME), BY_ID.values())
    assert [(s.task_id, s.node, s.attempts) for s in record.samples] == [
        ("ispm-001", "n-live", []),
        ("ispm-002", "n-live", [SampleAttempt(node="n-dead", outcome="lost", detail="NodeDiedError")]),
        ("ispm-003", "n-live", []),
    ]


def test_a_duplicate_result_is_an_attempt_never_a_second_vote(tmp_path: Path) -> None:
    folder = _run(tmp_path, FlakyCluster())
    before = build_record(read_entries(folder / JOURNAL_NAME), BY_ID.values())
    late = SampleOutput(task_id="ispm-001", epoch=1, status="ok", answer=Answer(response="nothing"))
    with Journal(folder / JOURNAL_NAME) as journal:
        journal.append(SampleFinished(output=late, node="n-slow"))
    after = build_record(read_entries(folder / JOURNAL_NAME), BY_ID.values())
    first = after.samples[0]
    assert first.task_id == "ispm-001"
    assert first.attempts == [SampleAttempt(node="n-slow", outcome="duplicate", detail="ok")]
    assert first.votes == before.samples[0].votes and first.queries_declared == before.samples[0].queries_declared
    assert after.scores == before.scores
    assert [first.model_copy(update={"attempts": []}), *after.samples[1:]] == before.samples


def test_a_node_left_out_is_in_the_record_and_changes_nothing_else(tmp_path: Path) -> None:
    folder = _run(tmp_path, FlakyCluster())
    before = build_record(read_entries(folder / JOURNAL_NAME), BY_ID.values())
    reasons = ["node nnnnnnnnnnnn (h9): task set digest is x, the driver's is t"]
    with Journal(folder / JOURNAL_NAME) as journal:
        journal.append(NodeLeftOut(node="n" * 56, host="h9", joined=True, reasons=reasons))
    entries = read_entries(folder / JOURNAL_NAME)
    after = build_record(entries, BY_ID.values())
    assert before.nodes_left_out == []
    assert after.nodes_left_out == [
        LeftOutNode(node="n" * 56, host="h9", joined=True, reasons=reasons, at=entries[-1].ts)
    ]
    assert after.model_copy(update={"nodes_left_out": []}) == before
    # The end-of-run summary and the report name it too.
    result = RunResult(
        run_dir=folder, outcome="completed", record_path=folder / "record.json", record=after,
        report_path=folder / "report.html",
    )  # fmt: skip
    assert f"node h9 left out on joining: {reasons[0]}" in result.summary_lines()
    page = render_report(after, BY_ID.values(), "")
    assert 'id="nodes-left-out"' in page and f"<code>{'n' * 56}</code>" in page and "joined mid-run" in page
    assert 'id="nodes-left-out"' not in render_report(before, BY_ID.values(), "")
