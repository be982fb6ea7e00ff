"""Broken judges and candidates: caught at preflight, stopped by the circuit breakers, never ranked.

The judges and the candidate are real provider clients talking HTTP to scripted providers on loopback
(``fake_provider``); the candidate's requests go through the real gateway and its per-sample socket. Samples are
answered in-process (``breaker_runs``), so no test here needs Docker except the one that re-collects the
calibration set with the real agents.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from breaker_runs import (
    BY_ID,
    GRADING_TOKENS,
    JUDGE_A,
    JUDGE_B,
    JUDGE_KEY,
    RUN_TASKS,
    TRUTH,
    GatewayAgentBackend,
    GoldBackend,
    JudgeState,
    judged_spec,
    judges,
    stopped,
    unhealthy,
)
from click.testing import CliRunner
from fake_provider import FakeProvider, Reply, Seen, point_clients_at

from runner.cli import main
from runner.contract import Answer, SampleOutput
from runner.grading.grade import GradingContext
from runner.grading.judge import JudgeVote
from runner.grading.reference_judge import ReferenceJudge, gold_answer
from runner.paths import tasks_dir, world_dir
from runner.pipeline import resume_run, start_run
from runner.record.audit import audit
from runner.record.build import build_record, load_record
from runner.record.model import CandidateHealth
from runner.record.report import REPORT_NAME
from runner.run.calibration import CALIBRATION_JUDGES
from runner.run.dry_run import JudgeDryRunError, dry_run_judges, load_calibration_set
from runner.run.journal import (
    JOURNAL_NAME,
    RunFinished,
    RunStarted,
    RunStopped,
    SampleFinished,
    SampleGraded,
    read_entries,
)
from runner.run.progress import PlainProgress, duration
from runner.run.scheduler import planned_keys
from runner.run.spec import Digests, RunSpec
from runner.sample_key import SampleKey
from runner.world import SNAPSHOT_NAME

__all__ = ["judges", "stopped", "unhealthy"]  # fixtures, imported for pytest

CALIBRATION = [("replay", "ispm-002"), ("replay", "ispm-003"), ("replay", "ispm-005")]
CALIBRATION += [("null", t) for _, t in CALIBRATION]
EXCERPT = "'The grades are fine, trust me. [redacted]'"
MALFORMED = f"abstained after 3 call(s): malformed reply: the reply is not a JSON object; the reply began: {EXCERPT}"


def _preflight(*judge_aliases: str, json: bool = False) -> tuple[int, str]:
    args = ["preflight", "--candidate", "openai/cand"]
    for alias in judge_aliases:
        args += ["--judge", alias]
    result = CliRunner().invoke(main, args + (["--json"] if json else []))
    return result.exit_code, result.output


# -- the calibration set -----------------------------------------------------------------------------------


def test_the_calibration_set_is_what_the_replay_and_null_agents_write() -> None:
    samples = load_calibration_set(tasks_dir())
    assert [(s.agent, s.output.task_id) for s in samples] == CALIBRATION
    for s in samples:
        task, out = BY_ID[s.output.task_id], s.output
        assert out.status == "ok" and out.epoch == 1
        if s.agent == "replay":
            # The replay agent writes its recording's answer and runs the witness SQL through the SQL tool.
            assert out.answer == gold_answer(task, TRUTH[task.id])
            assert [q.sql for q in out.queries] == [task.witness_sql]
        else:
            assert out.answer == Answer(response="", verdict=None, evidence=[], queries=[])
            assert out.queries == []


def test_the_reference_judge_grades_gold_correct_and_null_incorrect() -> None:
    samples = load_calibration_set(tasks_dir())
    with GradingContext(world_dir() / SNAPSHOT_NAME) as context:
        (cost,) = dry_run_judges(
            [ReferenceJudge("ref")], samples, tasks=BY_ID, truths=TRUTH, context=context, planned=635
        )
    assert (cost.judge, cost.samples, cost.calls, cost.projected_samples) == ("ref", 6, 0, 635)


@pytest.mark.docker
@pytest.mark.parametrize("agent", ["replay", "null"])
def test_the_real_agents_collect_the_calibration_set_again(agent: str, tmp_path: Path) -> None:
    from runner.run.recordings import write_recordings

    task = BY_ID["ispm-005"]
    args = ["sandbox", "try", "--image", agent, "--task", task.id, "--json"]
    if agent == "replay":
        args += ["--replay-dir", str(write_recordings([task], TRUTH, tmp_path / "replay"))]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    fresh = SampleOutput.model_validate_json(result.output)
    shipped = next(
        s.output for s in load_calibration_set(tasks_dir()) if (s.agent, s.output.task_id) == (agent, task.id)
    )
    assert fresh.answer == shipped.answer
    assert [(q.sql, q.row_count, q.result_digest) for q in fresh.queries] == [
        (q.sql, q.row_count, q.result_digest) for q in shipped.queries
    ]


# -- the judges' dry run at preflight ----------------------------------------------------------------------


def test_a_judge_that_answers_text_fails_preflight_named(judges: tuple[FakeProvider, JudgeState]) -> None:
    _, state = judges
    state.broken.add("judge-b")
    code, output = _preflight(JUDGE_A, JUDGE_B)
    assert code == 1
    assert output == (
        "Error: a judge failed its dry run on the calibration set\n"
        f"  - judge {JUDGE_B}, every dimension, on the gold answer of ispm-002: malformed: {MALFORMED}\n"
    )
    # Judge A graded the whole set; judge B stopped at its first sample, after the judge's own three tries.
    assert state.gradings == {"judge-a": 6, "judge-b": 3}
    assert JUDGE_KEY not in output and "sk-leaked" not in output


def test_a_judge_that_grades_gold_incorrect_fails_preflight(judges: tuple[FakeProvider, JudgeState]) -> None:
    _, state = judges
    state.wrong.add("judge-a")
    code, output = _preflight(JUDGE_A, JUDGE_B)
    assert code == 1
    assert output == (
        "Error: a judge failed its dry run on the calibration set\n"
        f"  - judge {JUDGE_A}, answer_correctness, on the gold answer of ispm-002: graded incorrect, expected "
        "correct; said 'judge-a says incorrect'\n"
    )


def test_a_sound_judge_passes_and_its_tokens_are_projected(judges: tuple[FakeProvider, JudgeState]) -> None:
    import json

    code, output = _preflight(JUDGE_A, JUDGE_B, json=True)
    assert code == 0, output
    entries = json.loads(output)
    assert [e["role"] for e in entries] == ["candidate", "judge", "judge"] and "dry_run" not in entries[0]
    for entry, alias in zip(entries[1:], (JUDGE_A, JUDGE_B), strict=True):
        dry = entry["dry_run"]
        assert dry.pop("latency_s") > 0
        # Six calibration samples at 1,200 in / 80 out each; an official run grades 127 tasks x 5 epochs.
        assert dry == {
            "judge": alias,
            "samples": 6,
            "calls": 6,
            "input_tokens": 6 * GRADING_TOKENS[0],
            "output_tokens": 6 * GRADING_TOKENS[1],
            "projected_samples": 635,
            "projected_input_tokens": 635 * GRADING_TOKENS[0],
            "projected_output_tokens": 635 * GRADING_TOKENS[1],
            # The fewest and the most one calibration sample took: the range preflight prices (issue 32).
            "sample_input_tokens": [GRADING_TOKENS[0], GRADING_TOKENS[0]],
            "sample_output_tokens": [GRADING_TOKENS[1], GRADING_TOKENS[1]],
        }


def test_a_run_whose_judge_fails_preflight_never_starts(
    judges: tuple[FakeProvider, JudgeState], tmp_path: Path
) -> None:
    _, state = judges
    state.broken.add("judge-a")
    backend = GoldBackend()
    with pytest.raises(JudgeDryRunError, match=f"judge {JUDGE_A}, every dimension"):
        start_run(judged_spec(RUN_TASKS[:2]), tmp_path / "run", backend=backend, images={})
    assert backend.ran == [] and not (tmp_path / "run").exists()


# -- the circuit breakers ----------------------------------------------------------------------------------


def test_a_judge_breaking_after_20_samples_stops_the_run_and_resume_completes_it(
    judges: tuple[FakeProvider, JudgeState], tmp_path: Path
) -> None:
    _, state = judges
    run_dir = tmp_path / "run"
    spec = judged_spec(RUN_TASKS, epochs=4)  # 32 samples, K = 10 (the default)
    order = planned_keys(RUN_TASKS, 4)
    first = GoldBackend(lambda n: state.broken.add("judge-a") if n == 21 else None)
    result = start_run(spec, run_dir, backend=first, images={})

    reason = f"judge {JUDGE_A}: 10 malformed replies in a row; last: {MALFORMED}"
    assert result.outcome == "stopped"
    assert (result.record.status, result.record.stop_reason, result.record.scores) == ("incomplete", reason, None)
    assert first.ran == order[:30] and result.record.samples_graded == 30
    last = read_entries(run_dir / JOURNAL_NAME)[-1]
    assert isinstance(last, RunStopped) and (last.breaker, last.party, last.reason) == ("judge", JUDGE_A, reason)
    lines = result.summary_lines()
    assert f"stopped by a circuit breaker: {reason}" in lines
    assert f"fix the cause, then continue with: ispm run --resume {run_dir}" in lines
    assert "Stopped by a circuit breaker: judge openai/judge-a: 10 malformed replies in a row" in (
        run_dir / REPORT_NAME
    ).read_text(encoding="utf-8")

    state.broken.clear()  # the provider recovered
    second = GoldBackend()
    resumed = resume_run(run_dir, backend=second)
    assert resumed.outcome == "completed" and resumed.record.status == "completed"
    assert second.ran == order[30:]
    entries = read_entries(run_dir / JOURNAL_NAME)
    graded = [e.key for e in entries if isinstance(e, SampleGraded)]
    assert sorted(graded) == sorted(order) and len(graded) == len(set(graded)) == 32
    collected = [(e.output.task_id, e.output.epoch) for e in entries if isinstance(e, SampleFinished)]
    assert len(collected) == len(set(collected)) == 32
    # The resume dry-ran both judges again before running anything.
    starts = [e for e in entries if isinstance(e, RunStarted)]
    assert [[d.judge for d in s.judge_dry_runs] for s in starts] == [[JUDGE_A, JUDGE_B]] * 2
    assert [d.projected_samples for d in starts[1].judge_dry_runs] == [2, 2]

    # The ten samples that tripped the breaker stay graded, so the run is complete but unhealthy: not ranked.
    record = resumed.record
    assert record.health is not None
    health_a = record.health.judges[JUDGE_A]
    assert (health_a.samples, health_a.calls, health_a.malformed, health_a.refusals, health_a.errors) == (
        32,
        22 + 30,
        10,
        0,
        0,
    )
    votes_a = [v for sample in record.samples for v in sample.votes if v.judge == JUDGE_A]
    abstained = [v for v in votes_a if v.grade == "abstain"]
    assert {v.failure for v in abstained} == {"malformed"} and len({(v.task_id, v.epoch) for v in abstained}) == 10
    assert health_a.failure_rate == round(10 / 32, 6)
    assert health_a.abstention_rate == round(len(abstained) / len(votes_a), 6)
    assert record.health.judges[JUDGE_B].failure_rate == 0.0
    problem = (
        f"judge {JUDGE_A} could not grade 31.2% of its 32 samples (threshold 5%): 10 malformed, 0 refusals, 0 errors"
    )
    assert record.health.problems == [problem]
    assert record.unranked_reason == f"Not rankable, unhealthy run: {problem}."
    assert resumed.summary_lines()[:2] == [
        f"!!! UNHEALTHY RUN: {problem}",
        "!!! this run is not rankable: do not trust its score (docs/scoring.md, Health)",
    ]
    page = (run_dir / REPORT_NAME).read_text(encoding="utf-8")
    assert 'id="health-banner"' in page and problem in page
    report = audit(run_dir)
    assert report.ok, report.problems


def test_a_candidate_answering_401_stops_the_run_early(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def respond(seen: Seen) -> Reply | None:
        if "Investigate." not in str(seen.body):
            return None  # the preflight probe passes: the key breaks afterwards
        return Reply(status=401, body={"error": {"message": "Incorrect API key provided", "type": "auth_error"}})

    spec = RunSpec(
        agent_image="example/gateway-agent:1",
        candidate="openai/cand",
        judges=CALIBRATION_JUDGES,
        epochs=1,
        concurrency=1,
        tasks=RUN_TASKS,
        backend="local",
        breaker_after=3,
    )
    backend = GatewayAgentBackend()
    with FakeProvider(responder=respond) as fake:
        point_clients_at(monkeypatch, fake, "sk-candidate-key-1234567890", "unused")
        result = start_run(spec, tmp_path / "run", backend=backend, images={})
        agent_requests = [s for s in fake.seen if "Investigate." in str(s.body)]
    assert result.outcome == "stopped"
    assert backend.ran == planned_keys(RUN_TASKS, 1)[:3] and len(backend.statuses) == 3
    assert all(status >= 400 for status in backend.statuses)  # how the gateway relays a 401 is its own business
    assert len(agent_requests) == 3
    record = result.record
    assert record.stop_reason is not None
    assert record.stop_reason.startswith(
        "candidate openai/cand: every gateway request failed on 3 samples in a row; last: "
    )
    assert "401" in record.stop_reason and "sk-candidate-key" not in record.stop_reason
    assert record.health is not None
    assert record.health.candidate == CandidateHealth(requests=3, failed_requests=3, failed_rate=1.0)
    assert record.unranked_reason is not None and record.unranked_reason.startswith("Stopped by a circuit breaker")


# -- scores, standing and the terminal ---------------------------------------------------------------------


def _vote(task: str, epoch: int, judge: str, grade: str) -> JudgeVote:
    return JudgeVote(task_id=task, epoch=epoch, judge=judge, dimension="answer_correctness", grade=grade, rationale="")  # type: ignore[arg-type]


def _record(grades: dict[str, list[str]]) -> dict[int, float | None]:
    digests = Digests(**dict.fromkeys(["world_logical", "world_pinned", "task_set", "task_set_pinned"], "a" * 64),
                      ground_truth="b", rubric_set="c")  # fmt: skip
    tasks = sorted(grades)
    spec = RunSpec(agent_image="x", judges=CALIBRATION_JUDGES, epochs=2, tasks=tasks, backend="local")
    entries: list = [RunStarted(run_id="r", spec=spec, digests=digests, runner_version="0")]
    for task in tasks:
        for epoch, grade in enumerate(grades[task], start=1):
            out = SampleOutput(task_id=task, epoch=epoch, status="ok", answer=Answer(response="x"))
            votes = [_vote(task, epoch, j, grade) for j in CALIBRATION_JUDGES]
            entries += [SampleFinished(output=out), SampleGraded(task_id=task, epoch=epoch, graded=True, votes=votes)]
    entries.append(RunFinished(used_s=1.0))
    scores = build_record(entries, BY_ID.values()).scores
    assert scores is not None
    return scores.pass_hat_k


def test_pass_k_leaves_out_a_task_whose_every_epoch_abstained() -> None:
    # ispm-001 abstained in both epochs; ispm-002 was correct in both: pass^k is 1, not 0.5.
    assert _record({"ispm-001": ["abstain", "abstain"], "ispm-002": ["correct", "correct"]}) == {
        1: 1.0,
        2: 1.0,
        3: None,
        4: None,
        5: None,
    }
    # An abstaining epoch in a task with a real grade still counts as not correct.
    assert _record({"ispm-001": ["abstain", "correct"]})[1] == 0.5


def test_pass_k_is_na_when_every_task_abstained() -> None:
    assert _record({"ispm-001": ["abstain", "abstain"], "ispm-002": ["abstain", "abstain"]}) == dict.fromkeys(
        range(1, 6)
    )


def test_a_refused_run_spec_prints_one_clear_line() -> None:
    result = CliRunner().invoke(main, ["run", "--agent-image", "null", "--judge", "ref", "--judge", "ref"])
    assert result.exit_code == 1
    assert result.output == (
        "Error: judges: the two judge slots need distinct aliases (use ref#1 and ref#2), got ['ref', 'ref']\n"
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_progress_line_projects_the_end_against_the_run_limit() -> None:
    clock, out = _Clock(), io.StringIO()
    progress = PlainProgress(out, clock=clock)
    progress.begin(total=5, done=1, limit_s=100.0, used_s=10.0)  # an earlier attempt graded one in 10 s
    clock.now = 20.0
    progress.finished(SampleKey(task_id="ispm-001", epoch=1), "ok")
    clock.now = 60.0
    progress.finished(SampleKey(task_id="ispm-002", epoch=1), "ok")
    assert out.getvalue().splitlines() == [
        # 10 s before + 20 s now + 3 left at 20 s each = 90 s.
        "[2/5] ispm-001 epoch 1: ok (running 0, failed 0; projected 1m30s of the 1m40s limit)",
        # 10 + 60 + 2 left at 30 s each = 130 s: past the limit, said while there is time to stop.
        "[3/5] ispm-002 epoch 1: ok (running 0, failed 0; HEADING PAST THE 1m40s RUN LIMIT: projected 2m10s; "
        "past the limit the run gets no score)",
    ]
    assert [duration(s) for s in (43_200, 11_520, 240, 25, 95)] == ["12h", "3h12m", "4m", "25s", "1m35s"]


def test_every_unranked_run_says_why_in_the_analytics(stopped: Path, unhealthy: Path, tmp_path: Path) -> None:
    import json

    result = CliRunner().invoke(main, ["analytics", str(stopped), str(unhealthy), "--query", "unranked", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["run_id"]: r["unranked_reason"] for r in map(json.loads, result.output.splitlines())}
    expected = {load_record(d).run_id: load_record(d).unranked_reason for d in (stopped, unhealthy)}
    assert rows == expected
    assert expected[load_record(stopped).run_id].startswith(
        f"Stopped by a circuit breaker: judge {JUDGE_B}: 2 malformed replies in a row; last: "
    )
    assert expected[load_record(unhealthy).run_id].startswith(
        f"Not rankable, unhealthy run: judge {JUDGE_A} could not grade 33.3% of its 12 samples"
    )
    board = CliRunner().invoke(main, ["analytics", str(stopped), str(unhealthy), "--query", "leaderboard", "--json"])
    assert board.exit_code == 0 and board.output == ""


def test_ispm_run_prints_the_preflight_then_stops_on_the_breaker_with_exit_1(
    judges: tuple[FakeProvider, JudgeState], tmp_path: Path
) -> None:
    fake, state = judges
    original = fake.responder
    assert original is not None

    def respond(seen: Seen) -> Reply | None:
        # Judge B grades soundly for its dry run (six calibration samples), then answers plain text.
        if str(seen.body.get("model")) == "judge-b" and state.gradings.get("judge-b", 0) >= 6:
            state.broken.add("judge-b")
        return original(seen)

    fake.responder = respond
    run_dir = tmp_path / "run"
    args = ["run", "--agent-image", "null", "--backend", "local", "--epochs", "1", "--concurrency", "1"]
    args += ["--judge", JUDGE_A, "--judge", JUDGE_B, "--breaker-after", "2", "--run-dir", str(run_dir)]
    for task in RUN_TASKS[:4]:
        args += ["--task", task]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        f"model          {JUDGE_A}  ->  gpt-fake-2026-01-01",
        f"model          {JUDGE_B}  ->  gpt-fake-2026-01-01",
    ]
    assert lines[2].startswith(f"judge dry run  {JUDGE_A}: 6 calibration samples in 6 call(s), 7,200 in / 480 out")
    assert lines[2].endswith("projected for 4 samples: ~4,800 in / ~320 out tokens")
    assert lines[3].startswith(f"judge dry run  {JUDGE_B}: 6 calibration samples in 6 call(s)")
    reason = f"judge {JUDGE_B}: 2 malformed replies in a row; last: {MALFORMED}"
    assert f"stopped by a circuit breaker: {reason}" in lines
    assert load_record(run_dir).samples_graded == 2


def test_the_official_lock_fixes_the_breakers_k() -> None:
    from runner.run.spec import RunError, official

    digests = Digests(**dict.fromkeys(["world_logical", "world_pinned", "task_set", "task_set_pinned"], "a" * 64),
                      ground_truth="b", rubric_set="c")  # fmt: skip
    spec = RunSpec(agent_image="me/agent:1", candidate="openai/x", judges=(JUDGE_A, JUDGE_B), breaker_after=3)
    with pytest.raises(RunError) as refused:
        official(spec, digests)
    assert refused.value.problems == ["breaker_after is 3; v1 fixes it at 10"]
    assert official(spec.model_copy(update={"breaker_after": 10}), digests).official
