"""The ``ispm_enterprise_sql`` Inspect task, scorer and reducer: Inspect's own ``mockllm`` model as the scripted
candidate and judges, each sample in the real ``ispm`` sandbox on the real engine, graded against the real world."""

from __future__ import annotations

import json
import math
import secrets
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai._util.registry import registry_info
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import Model, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import SampleScore, Score
from inspect_ai.util import SandboxEnvironmentSpec
from inspect_solvers import bridged_openai_agents, planted_symlink
from report_runs import ScriptedBackend, scripted_spec
from test_boundaries import RUNNER, direct_imports

from runner.grading.consensus import consensus, read_votes
from runner.grading.grades import SCORES, Vote
from runner.grading.judge import dimensions_for
from runner.grading.reference_judge import gold_answer
from runner.inspect_eval.reducer import REDUCER_NAME, consensus_of, ispm_consensus
from runner.inspect_eval.sandbox import IspmSandboxConfig
from runner.inspect_eval.scorer import epoch_score, scored_mean
from runner.inspect_eval.task import ispm_enterprise_sql
from runner.inspect_eval.task_set import task_by_id, truths
from runner.pipeline import start_run
from runner.run.calibration import CALIBRATION_JUDGES
from runner.sandbox.images import ImageRef
from runner.trace.export import write_inspect

FIXTURES = Path(__file__).parent / "fixtures" / "consensus"
TASK_ID = "ispm-002"  # a verdict task: its gold answer is "no" with ten entities
RUN_ID = f"inspect-task-{secrets.token_hex(3)}"


def _scripted(output: ModelOutput) -> ModelOutput:
    # With usage given, mockllm does not count tokens with tiktoken, whose encoding it would download.
    output.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    return output


def _candidate(answers: list[dict[str, Any]]) -> Model:
    # Per epoch: the witness query through the sql tool, then the answer through submit.
    witness = task_by_id(TASK_ID).witness_sql
    outputs = []
    for answer in answers:
        outputs.append(_scripted(ModelOutput.for_tool_call("mockllm/model", "sql", {"query": witness})))
        outputs.append(_scripted(ModelOutput.for_tool_call("mockllm/model", "submit", answer)))
    return get_model("mockllm/model", custom_outputs=outputs, memoize=False)


def _gold() -> dict[str, Any]:
    answer = gold_answer(task_by_id(TASK_ID), truths()[TASK_ID])
    return answer.model_dump(mode="json", exclude={"format"})


def _run(candidate: Model, refs: dict[str, ImageRef], log_dir: Path, **options: Any) -> EvalLog:
    image = refs[options.pop("image", "base")].tag
    task = ispm_enterprise_sql(
        task_ids=[TASK_ID],
        judges=options.pop("judges", "ref,ref#2"),
        epochs=options.pop("epochs", 1),
        solver=options.pop("solver", None),
    )
    task.sandbox = SandboxEnvironmentSpec("ispm", IspmSandboxConfig(image=image, run_id=RUN_ID))
    [log] = inspect_eval(task, model=candidate, log_dir=str(log_dir), max_samples=1, display="none", **options)
    assert log.status == "success", log.error
    return log


def test_the_task_holds_all_127_tasks_for_5_epochs_in_the_ispm_sandbox_by_default() -> None:
    task = ispm_enterprise_sql()
    assert len(task.dataset) == 127
    assert task.epochs == 5
    assert task.epochs_reducer is not None and [registry_info(r).name for r in task.epochs_reducer] == [REDUCER_NAME]
    assert task.sandbox is not None and task.sandbox.type == "ispm"
    assert task.time_limit == 900


def test_the_task_keeps_only_the_tasks_its_filters_match() -> None:
    task = ispm_enterprise_sql(vendor="okta", kind="verdict")
    chosen = [task_by_id(str(s.id)) for s in task.dataset]
    assert chosen and all("okta" in t.vendors and t.kind == "verdict" for t in chosen)
    assert [s.id for s in ispm_enterprise_sql(task_ids="ispm-002,ispm-001").dataset] == ["ispm-001", "ispm-002"]


def test_the_task_refuses_an_unknown_task_id_by_name() -> None:
    with pytest.raises(ValueError, match="no such task: ispm-999"):
        ispm_enterprise_sql(task_ids=["ispm-001", "ispm-999"])


@pytest.mark.parametrize("name", ["abstentions", "min_within_epoch", "official_run_shuffled", "ties_go_down"])
def test_the_reducer_gives_the_v1_consensus_of_known_votes(name: str) -> None:
    votes = read_votes(FIXTURES / f"{name}.votes.jsonl")
    by_task: dict[str, dict[int, list[Vote]]] = defaultdict(lambda: defaultdict(list))
    for vote in votes:
        by_task[vote.task_id][vote.epoch].append(vote)
    expected = {(c.task_id, c.dimension): c.grade for c in consensus(votes)}
    reduced = {}
    for task_id, epochs in by_task.items():
        score = ispm_consensus()([epoch_score(epochs[e]) for e in sorted(epochs)])
        reduced |= {(task_id, d): g for d, g in score.metadata["consensus"].items()}  # type: ignore[index]
        assert score.value == {d: SCORES.get(g) for d, g in score.metadata["consensus"].items()}  # type: ignore[index]
    assert reduced == expected
    lines = (FIXTURES / f"{name}.expected.jsonl").read_text().splitlines()
    assert reduced == {(e["task_id"], e["dimension"]): e["grade"] for e in map(json.loads, filter(None, lines))}


def test_the_reducer_refuses_a_value_that_is_no_grade() -> None:
    with pytest.raises(ValueError, match=r"0\.7 is not the score of a grade"):
        consensus_of([{"answer_correctness": 0.7}])


@pytest.mark.docker
def test_a_scripted_candidate_that_queries_then_answers_right_is_correct(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    log = _run(_candidate([_gold()]), refs, tmp_path)
    [sample] = log.samples or []
    score = sample.scores["ispm_scorer"]  # type: ignore[index]
    assert score.value["answer_correctness"] == 1.0  # type: ignore[index]
    assert score.value["answer_verdict"] == 1.0  # type: ignore[index]
    assert score.metadata["status"] == "ok"  # type: ignore[index]
    assert score.metadata["queries_logged"] == 1  # type: ignore[index]  # the sql tool's call, logged in the sandbox
    assert score.metadata["coverage"]["table_recall"] == 1.0  # type: ignore[index]


@pytest.mark.docker
def test_a_scripted_wrong_answer_is_incorrect(refs: dict[str, ImageRef], tmp_path: Path) -> None:
    wrong = {"response": "Yes, every leaver still signs in.", "verdict": "yes", "evidence": [], "queries": []}
    log = _run(_candidate([wrong]), refs, tmp_path)
    [sample] = log.samples or []
    score = sample.scores["ispm_scorer"]  # type: ignore[index]
    assert score.value["answer_correctness"] == 0.0  # type: ignore[index]
    assert score.value["answer_verdict"] == 0.0  # type: ignore[index]


@pytest.mark.docker
def test_an_agent_image_behind_inspects_sandbox_agent_bridge_answers_right_in_our_sandbox(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    # The bridge's tools run from the sandbox's executable /var/tmp; the agent's Responses calls reach mockllm.
    gold = _gold()
    gold["evidence"] = [e | {"fact": e["fact"] or "cited"} for e in gold["evidence"]]  # the agent's tool wants one
    candidate = get_model(
        "mockllm/model",
        custom_outputs=[
            _scripted(ModelOutput.for_tool_call("mockllm/model", "run_sql", {"sql": task_by_id(TASK_ID).witness_sql})),
            _scripted(ModelOutput.for_tool_call("mockllm/model", "submit_answer", gold)),
        ],
        memoize=False,
    )
    log = _run(candidate, refs, tmp_path, image="agent-openai-agents", solver=bridged_openai_agents())
    [sample] = log.samples or []
    score = sample.scores["ispm_scorer"]  # type: ignore[index]
    assert score.metadata["status"] == "ok", score.metadata  # type: ignore[index]
    assert score.metadata["queries_logged"] == 1  # type: ignore[index]
    assert score.value["answer_correctness"] == 1.0  # type: ignore[index]


@pytest.mark.docker
def test_an_answer_planted_as_a_symlink_is_refused_with_its_reason_and_graded_incorrect(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    log = _run(get_model("mockllm/model", memoize=False), refs, tmp_path, solver=planted_symlink())
    [sample] = log.samples or []
    score = sample.scores["ispm_scorer"]  # type: ignore[index]
    assert score.metadata["status"] == "invalid_answer"  # type: ignore[index]
    assert "symlink" in score.metadata["error"]  # type: ignore[index]
    assert score.value["answer_correctness"] == 0.0  # type: ignore[index]


def _judge_reply(grades: dict[str, str]) -> ModelOutput:
    body = {"grades": {d: {"rationale": "scripted", "grade": g} for d, g in grades.items()}}
    return _scripted(ModelOutput.from_content("mockllm/model", json.dumps(body)))


@pytest.mark.docker
def test_an_inspect_runs_per_task_consensus_equals_ispm_runs_on_the_same_votes(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    # Three epochs; two scripted model judges that disagree, abstain and tie, so every rule of v1 is exercised.
    dims = dimensions_for(task_by_id(TASK_ID))
    a = [dict.fromkeys(dims, "correct"), dict.fromkeys(dims, "partial"), dict.fromkeys(dims, "abstain")]
    b = [dict.fromkeys(dims, "partial"), dict.fromkeys(dims, "correct"), dict.fromkeys(dims, "incorrect")]
    a[0]["answer_correctness"], b[2]["answer_correctness"] = "incorrect", "abstain"
    judge_a = get_model("mockllm/model", custom_outputs=[_judge_reply(g) for g in a], memoize=False)
    judge_b = get_model("mockllm/model", custom_outputs=[_judge_reply(g) for g in b], memoize=False)
    log = _run(
        _candidate([_gold()] * 3),
        refs,
        tmp_path,
        judges="judge_a,judge_b",
        epochs=3,
        model_roles={"judge_a": judge_a, "judge_b": judge_b},
    )
    votes = [
        Vote.model_validate(v, strict=False)
        for sample in log.samples or []
        for v in sample.scores["ispm_scorer"].metadata["votes"]  # type: ignore[index]
    ]
    assert len(votes) == 3 * 2 * len(dims)
    ispm = {c.dimension: c.grade for c in consensus(votes)}
    [reductions] = log.reductions or []
    [reduced] = reductions.samples
    assert reduced.metadata["consensus"] == ispm  # type: ignore[index]
    assert ispm["answer_correctness"] == "incorrect"  # epochs: incorrect, partial, incorrect
    assert ispm["evidence_completeness"] == "partial"  # epochs: partial, partial, incorrect


@pytest.mark.docker
def test_a_judge_role_whose_replies_do_not_parse_abstains_on_every_dimension_with_the_reason(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    dims = dimensions_for(task_by_id(TASK_ID))
    garbled = [_scripted(ModelOutput.from_content("mockllm/model", "I think it is fine.")) for _ in range(3)]
    judge_a = get_model("mockllm/model", custom_outputs=garbled, memoize=False)
    judge_b = get_model("mockllm/model", custom_outputs=[_judge_reply(dict.fromkeys(dims, "partial"))], memoize=False)
    log = _run(
        _candidate([_gold()]),
        refs,
        tmp_path,
        judges="judge_a,judge_b",
        model_roles={"judge_a": judge_a, "judge_b": judge_b},
    )
    [sample] = log.samples or []
    score = sample.scores["ispm_scorer"]  # type: ignore[index]
    votes_a = [v for v in score.metadata["votes"] if v["judge"].startswith("judge_a:")]  # type: ignore[index]
    assert {v["grade"] for v in votes_a} == {"abstain"} and {v["failure"] for v in votes_a} == {"malformed"}
    assert all("abstained after 3 call(s): malformed reply" in v["rationale"] for v in votes_a)
    assert score.value == dict.fromkeys(dims, 0.5)  # the other judge's grades stand


@pytest.mark.docker
def test_inspect_eval_from_the_command_line_runs_the_task_in_our_sandbox(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    # The gold answer through the task's own tools, by a scripted solver (tests/inspect_solvers.py says why).
    command = [
        str(Path(sys.executable).parent / "inspect"),
        "eval",
        "runner/ispm_enterprise_sql",
        "--model",
        "mockllm/model",
        "-T",
        f"task_ids={TASK_ID}",
        "-T",
        "judges=ref,ref#2",
        "-T",
        f"image={refs['base'].tag}",
        "--epochs",
        "1",
        "--solver",
        str(Path(__file__).parent / "inspect_solvers.py@gold_replay"),
        "--log-dir",
        str(tmp_path),
        "--display",
        "none",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    [path] = tmp_path.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.eval.task == "runner/ispm_enterprise_sql"
    assert log.eval.sandbox is not None and log.eval.sandbox.type == "ispm"
    [sample] = log.samples or []
    score = sample.scores["ispm_scorer"]  # type: ignore[index]
    assert score.metadata["status"] == "ok"  # type: ignore[index]
    assert score.metadata["queries_logged"] == 1  # type: ignore[index]
    assert score.value["answer_correctness"] == 1.0  # type: ignore[index]


@pytest.mark.docker
def test_an_inspect_eval_log_and_an_exported_run_of_the_same_task_are_one_task_scored_alike(
    refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    # The same task answered with gold by both, graded by the same two offline judges: once under `inspect eval`,
    # once by `ispm run` (in-process) and exported. Both logs read back as inspect view reads them.
    evaluated = _run(_candidate([_gold()]), refs, tmp_path / "eval", judges=",".join(CALIBRATION_JUDGES))
    run_dir = tmp_path / "run"
    start_run(scripted_spec([TASK_ID], epochs=1), run_dir, backend=ScriptedBackend({}), images={})
    logs = [read_eval_log(evaluated.location), read_eval_log(str(write_inspect(run_dir, tmp_path / "export")))]
    for log in logs:
        assert (log.eval.task, log.eval.task_registry_name) == ("runner/ispm_enterprise_sql",) * 2
        assert log.eval.config.epochs_reducer == ["runner/ispm_consensus"]
    evaluated_sample, exported_sample = (log.samples[0] for log in logs if log.samples)
    assert set(evaluated_sample.scores or {}) == set(exported_sample.scores or {}) == {"ispm_scorer"}
    values = [sample.scores["ispm_scorer"].value for sample in (evaluated_sample, exported_sample)]  # type: ignore[index]
    assert values[0] == values[1]
    assert values[0]["answer_correctness"] == 1.0 and values[0]["reasoning_utility"] is None  # type: ignore[index]
    summaries = [{(s.name, s.scorer, s.reducer) for s in log.results.scores} for log in logs if log.results]
    assert (
        summaries[0] == summaries[1] and ("answer_correctness", "ispm_scorer", "runner/ispm_consensus") in summaries[0]
    )
    means = [
        {s.name: m.value for s in log.results.scores for m in s.metrics.values() if not math.isnan(m.value)}
        for log in logs
        if log.results
    ]
    assert means[0] == means[1]
    assert all(set(s.metrics) <= {"scored_mean"} for log in logs if log.results for s in log.results.scores)


def test_only_runner_inspect_eval_imports_inspect() -> None:
    importers = sorted(
        path.relative_to(RUNNER).as_posix() for path in RUNNER.rglob("*.py") if "inspect_ai" in direct_imports(path)
    )
    assert importers and all(where.startswith("inspect_eval/") for where in importers)


def test_the_dimension_mean_leaves_abstentions_out_and_is_nan_when_nothing_was_scored() -> None:
    # Inspect hands a dict-valued score's metric each key's value alone, None for an abstention (unvalidated).
    metric = scored_mean()
    scores = [SampleScore(score=Score.model_construct(value=v), sample_id=i) for i, v in enumerate([1.0, None, 0.5])]
    assert metric(scores) == 0.75
    assert math.isnan(cast(float, metric([SampleScore(score=Score.model_construct(value=None), sample_id=1)])))
