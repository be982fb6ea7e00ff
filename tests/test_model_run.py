"""The model path end to end: ``ispm run`` with the reference agent, a candidate model and two LLM judges.

Nothing is faked inside the runner. The real ``ispm`` process starts the real gateway, runs the reference agent
image in a real locked-down container, forwards its requests with the host's key to a scripted provider (a real
HTTP server on loopback speaking OpenAI), and asks two judges at a second scripted provider (speaking Anthropic
Messages). The test then holds the record to the script: every token, step, returned model id and vote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, anthropic_message, openai_completion

from runner.grading.grades import DIMENSIONS
from runner.grading.judge import dimensions_for
from runner.paths import tasks_dir
from runner.record.audit import audit
from runner.record.model import RunRecord
from runner.tasks.load import load_tasks

TASK = "ispm-001"
CANDIDATE_KEY = "sk-e2e-candidate-9f3a1c"
JUDGE_KEY = "sk-ant-e2e-judge-4b7d2e"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
ANSWER = {
    "response": "Scripted: the investigation counted Okta users by status.",
    "verdict": None,
    "evidence": [{"vendor": "okta", "kind": "account", "identifier": "00u-scripted", "fact": "It is scripted."}],
    "queries": [SQL],
}
# (prompt, completion, cached) tokens of each agent step, as the scripted provider reports them.
AGENT_STEPS = [(101, 11, 0), (202, 22, 50), (303, 33, 0)]
JUDGE_USAGE = {"judge-a": (1000, 100), "judge-b": (2000, 200)}
ISPM = Path(sys.executable).with_name("ispm")

pytestmark = pytest.mark.docker


def _tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _grades(grade: str, rationale: str) -> str:
    dims = dimensions_for(next(t for t in load_tasks(tasks_dir()) if t.id == TASK))
    return json.dumps({"grades": {d: {"rationale": f"{rationale} on {d}", "grade": grade} for d in dims}})


@pytest.fixture(scope="module")
def providers() -> Iterator[tuple[FakeProvider, FakeProvider]]:
    with FakeProvider() as candidate, FakeProvider() as judges:
        # Preflight asks the candidate once, then the agent's three steps come through the gateway.
        candidate.push(Reply(body=openai_completion("ok", model="cand-2026-11-01")))
        calls = [
            _tool_call("c1", "list_tables", {}),
            _tool_call("c2", "run_sql", {"sql": SQL}),
            _tool_call("c3", "submit_answer", ANSWER),
        ]
        for (prompt, completion, cached), call in zip(AGENT_STEPS, calls, strict=True):
            body = openai_completion(
                None,
                prompt_tokens=prompt,
                completion_tokens=completion,
                cached_tokens=cached,
                model="cand-2026-11-01",
                tool_calls=[call],
            )
            candidate.push(Reply(body=body))
        # Preflight asks each judge once, in slot order; then each slot, in order, dry-runs the calibration set (three
        # gold answers, then three null ones); then each slot grades the one sample, in slot order.
        judges.push(
            Reply(body=anthropic_message(model="judge-a-2026")),
            Reply(body=anthropic_message(model="judge-b-2026")),
        )
        for name in ("judge-a", "judge-b"):
            for grade in ["correct"] * 3 + ["incorrect"] * 3:
                text = json.dumps({"grades": {d: {"rationale": "dry run", "grade": grade} for d in DIMENSIONS}})
                judges.push(Reply(body=anthropic_message([{"type": "text", "text": text}], model=f"{name}-2026")))
        for name, grade in (("judge-a", "correct"), ("judge-b", "partial")):
            text = _grades(grade, f"{name} says {grade}")
            tokens_in, tokens_out = JUDGE_USAGE[name]
            message = anthropic_message(
                [{"type": "text", "text": text}],
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                model=f"{name}-2026",
            )
            judges.push(Reply(body=message))
        yield candidate, judges


@pytest.fixture(scope="module")
def run_dir(providers: tuple[FakeProvider, FakeProvider], tmp_path_factory: pytest.TempPathFactory) -> Path:
    candidate, judges = providers
    folder = tmp_path_factory.mktemp("model-run") / "run"
    env = {
        **os.environ,
        "OPENAI_API_KEY": CANDIDATE_KEY,
        "OPENAI_BASE_URL": candidate.openai_base,
        "ANTHROPIC_API_KEY": JUDGE_KEY,
        "ANTHROPIC_BASE_URL": judges.anthropic_base,
    }
    args = ["run", "--agent-image", "reference", "--candidate", "openai/cand", "--task", TASK]
    args += ["--judge", "anthropic/judge-a", "--judge", "anthropic/judge-b", "--epochs", "1", "--concurrency", "1"]
    done = subprocess.run(
        [str(ISPM), *args, "--run-dir", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


@pytest.fixture(scope="module")
def record(run_dir: Path) -> RunRecord:
    return RunRecord.model_validate_json((run_dir / "record.json").read_text(encoding="utf-8"))


def test_the_agent_ran_its_scripted_investigation_in_the_sandbox(record: RunRecord) -> None:
    assert record.status == "completed" and not record.official and record.calibration is None
    (sample,) = record.samples
    assert sample.status == "ok", sample.error
    assert sample.queries_declared == [SQL]
    # list_tables and run_sql both went through the SQL tool in the container, which logged them.
    assert sample.queries_logged == 2
    assert sample.coverage is not None and sample.coverage.agent_tables == ["okta_users"]


def test_the_gateway_counted_every_agent_token_exactly(record: RunRecord) -> None:
    (sample,) = record.samples
    assert sample.agent is not None
    assert sample.agent.requests == len(AGENT_STEPS)
    assert sample.agent.input_tokens == sum(p for p, _, _ in AGENT_STEPS)
    assert sample.agent.output_tokens == sum(c for _, c, _ in AGENT_STEPS)
    assert record.agent_tokens == sample.agent
    # Every request is in the record, as the gateway booked it.
    assert [(c.api, c.stream, c.outcome, c.input_tokens, c.output_tokens) for c in sample.agent_calls] == [
        ("chat", False, "ok", p, c) for p, c, _ in AGENT_STEPS
    ]


def test_judge_tokens_are_kept_apart_from_the_agent(record: RunRecord) -> None:
    (sample,) = record.samples
    by_slot = {slot: (t.requests, t.input_tokens, t.output_tokens) for slot, t in sample.judges.items()}
    assert by_slot == {
        "anthropic/judge-a": (1, *JUDGE_USAGE["judge-a"]),
        "anthropic/judge-b": (1, *JUDGE_USAGE["judge-b"]),
    }
    assert record.judge_tokens == sample.judges


def test_preflight_dry_ran_each_judge_on_the_calibration_set(record: RunRecord) -> None:
    # anthropic_message's default usage: 13 in, 5 out per call; the run grades one sample.
    assert [(d.judge, d.samples, d.calls, d.input_tokens, d.output_tokens) for d in record.judge_dry_runs] == [
        ("anthropic/judge-a", 6, 6, 6 * 13, 6 * 5),
        ("anthropic/judge-b", 6, 6, 6 * 13, 6 * 5),
    ]
    assert [(d.projected_samples, d.projected_input_tokens) for d in record.judge_dry_runs] == [(1, 13), (1, 13)]


def test_preflight_pinned_the_model_ids_the_wire_returned(record: RunRecord) -> None:
    assert record.candidate_model == "openai/cand"
    assert record.resolved_models == {
        "openai/cand": "cand-2026-11-01",
        "anthropic/judge-a": "judge-a-2026",
        "anthropic/judge-b": "judge-b-2026",
    }


def test_within_an_epoch_the_lower_judge_grade_wins(record: RunRecord) -> None:
    assert record.scores is not None
    (task,) = record.scores.tasks
    assert set(task.grades.values()) == {"partial"}
    (sample,) = record.samples
    rationales = {v.judge: v.rationale for v in sample.votes if v.dimension == "answer_correctness"}
    assert rationales == {
        "anthropic/judge-a": "judge-a says correct on answer_correctness",
        "anthropic/judge-b": "judge-b says partial on answer_correctness",
    }


def test_the_keys_went_to_the_providers_and_nowhere_else(
    providers: tuple[FakeProvider, FakeProvider], run_dir: Path
) -> None:
    candidate, judges = providers
    assert {s.headers.get("authorization") for s in candidate.seen} == {f"Bearer {CANDIDATE_KEY}"}
    assert {s.headers.get("x-api-key") for s in judges.seen} == {JUDGE_KEY}
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"journal.jsonl", "record.json", "report.html"}
    for path in files:
        content = path.read_bytes()
        assert CANDIDATE_KEY.encode() not in content, path
        assert JUDGE_KEY.encode() not in content, path


def test_the_model_run_audits_clean(run_dir: Path) -> None:
    report = audit(run_dir)
    assert report.ok, report.problems
    assert report.checks["coverage_samples"] == 1
