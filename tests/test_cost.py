"""What a run costs: dollars derived from the record's tokens, shown in the report, the leaderboard, ``ispm analytics``
and ``ispm trace``; a model the price library does not know shows tokens only, with a note.

The runs are the fake-provider runs of ``tests/fixtures/v1_runs`` (the real gateway, an agent in every wire API, two
model judges). Their scripted model names are unknown to any price list, so the priced run is the same journal with
its aliases renamed to models the price data knows: the expected dollars are worked out by hand below from those
models' published rates, not read back from the library.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from runner.call import Usage
from runner.paths import tasks_dir
from runner.prices import PRICE_LIBRARY_VERSION, PRICES_LABEL, Cost, price, usd_text
from runner.record.build import build_record, write_record
from runner.record.cost import judge_cost_range, projection_lines, run_cost
from runner.record.leaderboard import board_rows, cost_plot, pareto_frontier, render_leaderboard, write_leaderboard
from runner.record.model import RunRecord
from runner.record.report import write_report
from runner.record.store import QUERIES, load_summaries, open_store, run_query
from runner.run.journal import JOURNAL_NAME, read_entries
from runner.run.model import JudgeDryRun
from runner.tasks.load import load_tasks

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "fixtures" / "v1_runs" / "openai"
ISPM = Path(sys.executable).with_name("ispm")
RENAMED = {"openai/gpt-scripted-1": "openai/gpt-4o", "openai/judge-a": "openai/gpt-4o-mini",
           "openai/judge-b": "openai/gpt-4.1-mini"}  # fmt: skip
# Dollars per million tokens, as the providers publish them: (input, cached input, output).
GPT_4O = (2.50, 1.25, 10.00)
GPT_4O_MINI = (0.15, 0.075, 0.60)
GPT_41_MINI = (0.40, 0.10, 1.60)


def by_hand(rates: tuple[float, float, float], tokens_in: int, cached: int, tokens_out: int) -> float:
    return ((tokens_in - cached) * rates[0] + cached * rates[1] + tokens_out * rates[2]) / 1e6


# The fixture run's tokens (its record.json): the agent 1527 in (496 cached) / 232 out; each judge 2400 / 160.
AGENT_USD = by_hand(GPT_4O, 1527, 496, 232)
JUDGES_USD = by_hand(GPT_4O_MINI, 2400, 0, 160) + by_hand(GPT_41_MINI, 2400, 0, 160)


@pytest.fixture(scope="module")
def priced_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture run, its models renamed to ones the price data knows, recorded and reported."""
    folder = tmp_path_factory.mktemp("priced") / "run"
    shutil.copytree(RUN, folder)
    journal = (folder / JOURNAL_NAME).read_text(encoding="utf-8")
    for old, new in RENAMED.items():
        journal = journal.replace(old, new)
    (folder / JOURNAL_NAME).write_text(journal, encoding="utf-8")
    record = build_record(read_entries(folder / JOURNAL_NAME), load_tasks(tasks_dir()))
    write_record(folder, record)
    write_report(folder, record)
    return folder


def test_a_known_model_is_priced_at_its_published_rates() -> None:
    assert price("openai/gpt-4o", Usage(input_tokens=1000, cached_tokens=400, output_tokens=100)).usd == (
        pytest.approx(by_hand(GPT_4O, 1000, 400, 100))
    )
    # Anthropic: $3 in, $0.30 cache read, $3.75 cache write, $15 out per million; reads and writes are parts of input.
    usage = Usage(input_tokens=2000, cached_tokens=500, cache_write_tokens=1000, output_tokens=100)
    assert price("anthropic/claude-sonnet-4-0", usage).usd == pytest.approx(
        (500 * 3 + 500 * 0.3 + 1000 * 3.75 + 1500) / 1e6
    )


@pytest.mark.parametrize("alias", ["openai/gpt-scripted-1", "vllm/llama-3-8b", "no-slash"])
def test_a_model_the_price_data_does_not_know_keeps_its_tokens_with_a_note(alias: str) -> None:
    cost = price(alias, Usage(input_tokens=10, output_tokens=1))
    assert cost.usd is None and cost.text() == "tokens only"
    assert len(cost.unpriced) == 1 and alias in cost.unpriced[0]


def test_unpriced_tokens_beside_priced_ones_make_a_partial_sum() -> None:
    known = price("openai/gpt-4o", Usage(input_tokens=1000, output_tokens=100))
    free = price("openai/gpt-scripted-1", Usage())  # no tokens: nothing to price, whatever the model
    unknown = price("openai/gpt-scripted-1", Usage(input_tokens=1))
    assert free == Cost(usd=0.0)
    assert (known + unknown).usd == known.usd and (known + unknown).text().endswith("(partial)")
    assert (free + unknown).text() == "tokens only"  # not "$0"


def test_the_pinned_price_library_is_the_one_installed_and_named() -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert f"genai-prices=={PRICE_LIBRARY_VERSION}" in pins
    assert metadata.version("genai-prices") == PRICE_LIBRARY_VERSION
    assert PRICE_LIBRARY_VERSION in PRICES_LABEL


def test_the_run_is_priced_per_party_task_and_sample(priced_run: Path) -> None:
    record = RunRecord.model_validate_json((priced_run / "record.json").read_bytes())
    cost = run_cost(record)
    assert cost.agent_cost.usd == pytest.approx(AGENT_USD)
    assert sorted(j.party for j in cost.judges) == ["openai/gpt-4.1-mini", "openai/gpt-4o-mini"]
    assert cost.judge_cost.usd == pytest.approx(JUDGES_USD)
    assert cost.total.complete and cost.total.usd == pytest.approx(AGENT_USD + JUDGES_USD)
    assert sum(t.total.usd or 0 for t in cost.tasks) == pytest.approx(AGENT_USD + JUDGES_USD)
    assert [(s.task_id, s.epoch) for s in cost.samples] == [(s.task_id, s.epoch) for s in record.samples]
    assert "cost" not in (priced_run / "record.json").read_text(encoding="utf-8")  # derived, never stored


def test_a_provider_that_reported_no_usage_is_noted(priced_run: Path) -> None:
    record = RunRecord.model_validate_json((priced_run / "record.json").read_bytes())
    sample = record.samples[0]
    silent = sample.agent_calls[0].model_copy(update={"outcome": "ok", "input_tokens": 0, "output_tokens": 0})
    changed = record.model_copy(
        update={"samples": [sample.model_copy(update={"agent_calls": [silent]}), *record.samples[1:]]}
    )
    cost = run_cost(changed)
    assert any("reported no usage" in n for n in cost.samples[0].agent.unpriced)
    assert cost.samples[0].agent.usd is not None  # the tokens it did report are still priced


def test_the_report_shows_dollars_beside_the_price_data(priced_run: Path) -> None:
    page = (priced_run / "report.html").read_text(encoding="utf-8")
    total = re.search(r'id="run-cost".*?<b>([^<]*)</b></td></tr>', page)
    assert total is not None and total.group(1) == usd_text(AGENT_USD + JUDGES_USD)
    assert PRICES_LABEL in page
    assert len(re.findall(r'class="task-cost">cost \$', page)) == 2
    assert len(re.findall(r'class="sample-cost">cost \$', page)) == 2


def test_an_unknown_model_shows_tokens_only_in_the_report(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    page = write_report(folder).read_text(encoding="utf-8")
    total = re.search(r'id="run-cost".*?<b>([^<]*)</b></td></tr>', page)
    assert total is not None and total.group(1) == "tokens only"
    assert "openai/gpt-scripted-1: not in " + PRICES_LABEL in page


def test_the_leaderboard_shows_each_runs_cost(priced_run: Path, tmp_path: Path) -> None:
    out, rows = write_leaderboard([priced_run, RUN], tmp_path / "leaderboard.html")
    assert [r.cost.text() for r in rows] == [usd_text(AGENT_USD + JUDGES_USD), "tokens only"]
    page = out.read_text(encoding="utf-8")
    assert f'data-sort="{rows[0].cost.usd}"' in page and PRICES_LABEL in page


def test_analytics_prices_runs_and_tasks(priced_run: Path) -> None:
    conn = open_store(load_summaries([priced_run, RUN]))
    columns, rows = run_query(conn, QUERIES["cost"])
    by_model = {row[columns.index("candidate_model")]: dict(zip(columns, row, strict=True)) for row in rows}
    assert by_model["openai/gpt-4o"]["cost_usd"] == pytest.approx(AGENT_USD + JUDGES_USD, abs=1e-6)
    assert by_model["openai/gpt-scripted-1"]["cost_usd"] is None
    assert "gpt-scripted-1" in by_model["openai/gpt-scripted-1"]["cost_note"]
    _, tasks = run_query(conn, QUERIES["cost-by-task"])
    assert sum(t[-1] for t in tasks if t[-1] is not None) == pytest.approx(AGENT_USD + JUDGES_USD, abs=1e-5)


def test_ispm_trace_ends_with_the_samples_cost(priced_run: Path) -> None:
    done = subprocess.run(
        [str(ISPM), "trace", str(priced_run), "--task", "ispm-001", "--text"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    last = [line for line in done.stdout.splitlines() if line.startswith("cost")]
    # The journal was renamed, the transcripts were not: the agent's calls are priced as the run's candidate,
    # the judges' as the aliases their transcript names, which the price data does not know.
    assert last[0].startswith("cost: $") and "agent $" in last[0] and "judges tokens only" in last[0]
    assert PRICES_LABEL in last[0]
    assert any("openai/judge-a: not in" in line for line in last[1:])


# --- preflight's projection ------------------------------------------------------------------------------------


def _dry_run(judge: str) -> JudgeDryRun:
    return JudgeDryRun(
        judge=judge, samples=6, calls=6, input_tokens=12_000, output_tokens=750, latency_s=1.0,
        projected_samples=635, projected_input_tokens=1_270_000, projected_output_tokens=79_375,
        sample_input_tokens=(1000, 3000), sample_output_tokens=(50, 200),
    )  # fmt: skip


def test_preflight_prices_the_judges_over_the_run_as_a_range() -> None:
    found = judge_cost_range(_dry_run("openai/gpt-4o-mini"))
    assert found is not None
    low, high = found
    # 635 calls, each as cheap as the cheapest calibration sample (1,000 in / 50 out), or as dear as the dearest.
    assert low.usd == pytest.approx(by_hand(GPT_4O_MINI, 1000 * 635, 0, 50 * 635))
    assert high.usd == pytest.approx(by_hand(GPT_4O_MINI, 3000 * 635, 0, 200 * 635))
    lines = projection_lines([_dry_run("openai/gpt-4o-mini"), _dry_run("openai/gpt-4.1-mini")])
    both = by_hand(GPT_4O_MINI, 1000 * 635, 0, 50 * 635) + by_hand(GPT_41_MINI, 1000 * 635, 0, 50 * 635)
    assert lines[2].startswith(f"projected cost of the judges: {usd_text(both)} to ") and "1,270 calls" in lines[2]
    assert PRICES_LABEL in lines[3]


def test_a_dry_run_recorded_before_ranges_projects_no_cost_and_is_written_as_before() -> None:
    old = _dry_run("openai/gpt-4o-mini").model_copy(update={"sample_input_tokens": None, "sample_output_tokens": None})
    assert judge_cost_range(old) is None and projection_lines([old]) == []
    assert "sample_input_tokens" not in old.model_dump_json()


def test_an_unpriced_judge_projects_tokens_only_with_a_note() -> None:
    lines = projection_lines([_dry_run("openai/judge-a")])
    assert lines[0].startswith("projected cost openai/judge-a: tokens only to tokens only")
    assert "openai/judge-a: not in" in lines[1]


# --- the leaderboard's plot ------------------------------------------------------------------------------------


def test_the_pareto_frontier_keeps_runs_no_cheaper_run_matches() -> None:
    runs = [("a", 1.0, 0.9), ("b", 0.1, 0.5), ("c", 0.5, 0.4), ("d", 1.0, 0.7), ("e", 0.1, 0.3), ("f", 5.0, 0.9)]
    assert pareto_frontier(runs) == {"a", "b"}  # c, e: b is cheaper or as cheap and better; d, f: a is


def _ranked(record: RunRecord, run_id: str, candidate: str, correctness: float) -> RunRecord:
    assert record.scores is not None and record.health is not None
    dims = dict(record.scores.dimensions)
    dims["answer_correctness"] = dims["answer_correctness"].model_copy(update={"mean": correctness})
    return record.model_copy(
        update={
            "run_id": run_id,
            "candidate_model": candidate,
            "health": record.health.model_copy(update={"problems": []}),
            "scores": record.scores.model_copy(update={"dimensions": dims}),
        }
    )


def test_the_leaderboard_plots_correctness_against_cost_and_lists_unpriced_runs(priced_run: Path) -> None:
    record = RunRecord.model_validate_json((priced_run / "record.json").read_bytes())
    records = [
        _ranked(record, "run-a", "openai/gpt-4o", 1.0),
        _ranked(record, "run-b", "openai/gpt-4o-mini", 0.5),
        _ranked(record, "run-d", "openai/gpt-4o", 0.5),  # as dear as run-a, less correct
        _ranked(record, "run-e", "openai/gpt-scripted-1", 0.9),  # its agent has no price
    ]
    rows = board_rows([(r, None) for r in records])
    plot = cost_plot(rows)
    assert plot is not None
    assert [(p.run_id, p.frontier) for p in plot.points] == [("run-b", True), ("run-a", True), ("run-d", False)]
    assert plot.unpriced == ["run-e"]
    cheap, dear = plot.points[0], plot.points[1]
    assert cheap.x < dear.x and cheap.y > dear.y  # cheaper to the left, more correct higher up
    # Log scale: whole decades from below the cheapest run to above the dearest, one tick each.
    assert [label for _, label in plot.x_ticks] == ["$0.001", "$0.01"]
    page = render_leaderboard(rows, "# Scoring")
    assert page.count('class="run frontier"') == 2 and page.count('class="run"') == 1
    assert 'id="unplotted"' in page and "run-e" in page.split('id="unplotted"')[1].split("</p>")[0]


def test_no_ranked_run_no_plot() -> None:
    record = RunRecord.model_validate_json((RUN / "record.json").read_bytes())  # unhealthy: listed, not ranked
    assert cost_plot(board_rows([(record, None)])) is None
