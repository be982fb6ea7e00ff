"""``ispm trace`` and ``ispm export`` on a run written with fixed times (``trace_runs``): exact output."""

from __future__ import annotations

import json
from pathlib import Path

import atif
import pytest
from click.testing import CliRunner
from inspect_ai.log import read_eval_log
from trace_runs import write_run

from runner.cli import main

TEXT = """\
ispm-001 epoch 1 · ok · run 20261201T090000Z-trace
agent: 2 calls, 320 in / 35 out tokens · judges: 1 calls, 50 in / 9 out tokens · transcript kept
who wrote what: model calls captured by the host (its gateway); SQL logged by the SQL tool inside the sandbox (as the agent's user: the agent could write such a line itself), each marked as the host's replay found it; 'reported by the agent' lines written by the agent (trace.jsonl)
note: 2 trace.jsonl entries are the agent's own account, not checked by the host
09:00:01.000  model call 1  messages  claude-x-2026  120 in, 100 cached / 30 out  0.50 s  tool_use
    system: You are an analyst.\\x1b[2J Query with ispm-sql.
    tools: run_sql
    user: Which leavers can still sign in?
    assistant: Counting users <script>window.pwned = 1</script>
    tool call run_sql (toolu_1): {"sql": "SELECT status, count(*) AS n FROM okta_users GROUP BY status"}
        SELECT status, count(*) AS n
        FROM okta_users
        GROUP BY status
09:00:01.996  SQL logged in the sandbox  5 rows  4.0 ms  · host replay: same rows
    SELECT status, count(*) AS n
    FROM okta_users
    GROUP BY status
09:00:02.200  reported by the agent: {"note": "ran the count", "ts": "2026-12-01T09:00:02.200000+00:00"}
--:--:--.---  reported by the agent: {"subtype": "</pre><script>window.pwned = 3</script>", "type": "result"}
09:00:02.499  SQL logged in the sandbox  error: no such column: nope  1.0 ms  · host replay: not replayed (the sample's analysis budget was spent)
    SELECT nope
    FROM okta_users
09:00:03.000  model call 2  messages  claude-x-2026  200 in / 5 out  0.25 s  end_turn
    tool result (toolu_1): status | n
    ACTIVE | 1224
    assistant: Done.
09:00:05.000  answer  ok
    verdict: none
    Nobody <b>left</b> can sign in.
    evidence: 0 items; declared SQL: 1
09:00:05.500  judge call (openai/judge-x) 1  chat  judge-x-1  50 in / 9 out  0.30 s  stop
    system: Grade the answer.
    user: The answer: Nobody left.
    judge: {"grades": {"answer_correctness": {"grade": "incorrect", "rationale": "misses the leavers"}}}
09:00:06.000  vote  ref#1  answer_correctness  incorrect
    recall 0.00 (0/18)
09:00:06.000  vote  ref#1  reasoning_utility  abstain
    the reference judge does not grade reasoning utility
09:00:06.000  vote  ref#2  answer_correctness  incorrect
    recall 0.00 (0/18)
09:00:06.000  vote  ref#2  reasoning_utility  abstain
    the reference judge does not grade reasoning utility
cost: tokens only · agent tokens only · judges tokens only · prices: genai-prices 0.2.3, price data of 2026-11
cost note: anthropic/claude-x: not in genai-prices 0.2.3, price data of 2026-11, tokens only
cost note: openai/judge-x: not in genai-prices 0.2.3, price data of 2026-11, tokens only
"""

BARE_HEAD = """\
ispm-001 epoch 1 · ok · run 20261201T090000Z-trace
agent: 2 calls, 320 in / 35 out tokens · judges: 0 calls, 0 in / 0 out tokens · transcript none
who wrote what: model calls captured by the host (its gateway); SQL logged by the SQL tool inside the sandbox (as the agent's user: the agent could write such a line itself), each marked as the host's replay found it; 'reported by the agent' lines written by the agent (trace.jsonl)
note: no transcript of the model calls: the gateway's figures only, without content or time
note: 2 trace.jsonl entries are the agent's own account, not checked by the host
--:--:--.---  model call 1  messages  claude-x-2026  120 in, 100 cached / 30 out  0.50 s  ok
--:--:--.---  model call 2  messages  claude-x-2026  200 in / 5 out  0.25 s  ok
09:00:01.996  SQL logged in the sandbox  5 rows  4.0 ms  · host replay: same rows
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("trace-cli") / "run")


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("trace-cli") / "bare", with_transcript=False)


def _ispm(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, list(args))
    return done.exit_code, done.stdout, done.stderr


def test_trace_prints_the_timeline_as_text_in_time_order(run: Path) -> None:
    assert _ispm("trace", str(run), "--task", "ispm-001", "--epoch", "1", "--text") == (0, TEXT, "")


def test_trace_of_a_run_without_transcripts_shows_the_gateways_figures_untimed_first(bare: Path) -> None:
    code, out, _ = _ispm("trace", str(bare), "--task", "ispm-001", "--text")
    assert code == 0 and out.startswith(BARE_HEAD)


def test_trace_prints_json_when_piped_and_with_json(run: Path) -> None:
    code, piped, _ = _ispm("trace", str(run), "--task", "ispm-001")
    assert code == 0 and _ispm("trace", str(run), "--task", "ispm-001", "--json") == (0, piped, "")
    timeline = json.loads(piped)
    assert piped == json.dumps(timeline, indent=2, sort_keys=True) + "\n"  # the README's "object" shape
    assert [e["kind"] for e in timeline["events"]] == [
        "model_call", "query", "agent_reported", "agent_reported", "query", "model_call", "answer", "model_call",
        "vote", "vote", "vote", "vote",
    ]  # fmt: skip
    assert timeline["events"][1] == {
        "kind": "query",
        "at": "2026-12-01T09:00:01.996000Z",
        "sql": "SELECT status, count(*) AS n FROM okta_users GROUP BY status",
        "row_count": 5,
        "truncated": False,
        "duration_ms": 4.0,
        "error": None,
        "logged_by": "sql_tool_in_sandbox",
        "replay": {"finding": "same", "detail": None},
    }
    assert timeline["events"][4]["replay"] == {
        "finding": "not_replayed",
        "detail": "the sample's analysis budget was spent",
    }
    assert timeline["events"][3] == {
        "kind": "agent_reported",
        "at": None,
        "reported_by": "agent",
        "entry": {"type": "result", "subtype": "</pre><script>window.pwned = 3</script>"},
    }
    sent = timeline["events"][5]["sent"]
    assert sent == [
        {"role": "user", "parts": [{"type": "tool_result", "call_id": "toolu_1", "text": "status | n\nACTIVE | 1224",
                                    "is_error": False}]}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "ispm-999"], "Error: the run holds no sample of task ispm-999\n"),
        (
            ["--task", "ispm-001", "--epoch", "3"],
            "Error: the run holds no sample ispm-001 epoch 3 (it holds epochs 1)\n",
        ),
    ],
)
def test_trace_names_a_sample_the_run_does_not_hold(run: Path, args: list[str], message: str) -> None:
    assert _ispm("trace", str(run), *args) == (1, "", message)


def test_trace_refuses_json_and_text_together(run: Path) -> None:
    code, _, err = _ispm("trace", str(run), "--task", "ispm-001", "--json", "--text")
    assert code == 2 and err.endswith("Error: --json and --text exclude each other\n")


def test_trace_of_a_folder_without_a_journal_says_so(tmp_path: Path) -> None:
    code, out, err = _ispm("trace", str(tmp_path), "--task", "ispm-001")
    assert (code, out) == (1, "") and err.startswith(f"Error: cannot read journal {tmp_path}/journal.jsonl: ")


def test_export_atif_says_where_and_how_many(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "atif"
    assert _ispm("export", str(run), "--format", "atif", "--out", str(out)) == (
        0,
        f"{out}: 1 ATIF-v1.8 trajectories\n",
        "",
    )
    assert sorted(p.name for p in out.iterdir()) == ["ispm-001.e1.trajectory.json"]
    atif.Trajectory.model_validate_json((out / "ispm-001.e1.trajectory.json").read_text(encoding="utf-8"))


def test_export_inspect_writes_beside_the_run_folder_by_default(run: Path) -> None:
    expected = run.parent / "run.inspect" / "2026-12-01T09-00-00_ispm-enterprise-sql_20261201T090000Z-trace.json"
    assert _ispm("export", str(run), "--format", "inspect") == (0, f"{expected}: Inspect eval log\n", "")
    assert read_eval_log(str(expected)).eval.run_id == "20261201T090000Z-trace"


@pytest.mark.parametrize("fmt", ["atif", "inspect"])
def test_export_refuses_to_write_inside_the_run_folder(run: Path, fmt: str) -> None:
    inside = run / "exports"
    message = f"Error: the export {inside} must not be written inside the run folder {run}\n"
    assert _ispm("export", str(run), "--format", fmt, "--out", str(inside)) == (1, "", message)
    assert not inside.exists()
