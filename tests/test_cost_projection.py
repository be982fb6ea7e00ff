"""Preflight projects the candidate's cost before anything is spent (issue 32 item 2): from the agent's tokens on the
calibration tasks in earlier runs of the same agent image, every planned sample as the cheapest and as the dearest of
them, priced as the candidate; a model the price data does not know gets tokens and a note.

The earlier runs are the fake-provider run of ``tests/fixtures/v1_runs/openai`` (the real gateway's token counts),
its two samples moved onto calibration tasks, and ``ispm preflight`` runs through the real CLI against the scripted
provider on loopback. The expected dollars are worked out by hand from the model's published rates.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_provider import FakeProvider, fake_provider, point_clients_at

from runner.cli import main
from runner.pipeline import candidate_projection_lines
from runner.prices import usd_text
from runner.record.model import RECORD_NAME
from runner.run.model import JudgeDryRun

__all__ = ["fake_provider"]  # the imported fixture is used by name

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "tests" / "fixtures" / "v1_runs" / "openai" / RECORD_NAME
AGENT = "example/fixture-agent:1"
KEY = f"sk-projection-marker-{uuid.uuid4().hex}"
PLANNED = 635  # 127 tasks x 5 epochs: what ispm preflight projects over
GPT_4O = (2.50, 1.25, 10.00)  # dollars per million tokens: input, cached input, output


def by_hand(tokens_in: int, cached: int, tokens_out: int) -> float:
    return ((tokens_in - cached) * GPT_4O[0] + cached * GPT_4O[1] + tokens_out * GPT_4O[2]) / 1e6


# The fixture run's samples: the agent took 1027 in (296 cached) / 152 out on one, 500 (200 cached) / 80 on the other.
DEAR, CHEAP = by_hand(1027, 296, 152) * PLANNED, by_hand(500, 200, 80) * PLANNED


def earlier_run(folder: Path, name: str, *, candidate: str, agent_image: str, tasks: tuple[str, str]) -> None:
    """The fixture run's record under ``folder/name``, its candidate, agent image and samples' tasks replaced."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    record["run_id"], record["candidate_model"] = name, candidate
    record["spec"]["agent_image"] = agent_image
    for sample, task in zip(record["samples"], tasks, strict=True):
        sample["task_id"] = task
    (folder / name).mkdir(parents=True)
    (folder / name / RECORD_NAME).write_text(json.dumps(record), encoding="utf-8")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Earlier runs: the agent's on two calibration tasks, its on tasks outside the calibration set, another agent's
    on the calibration tasks (ten times dearer if it counted), and a folder whose record does not read."""
    earlier_run(tmp_path, "a-calibration", candidate="openai/gpt-4o", agent_image=AGENT, tasks=("ispm-005", "ispm-002"))
    earlier_run(tmp_path, "b-elsewhere", candidate="openai/gpt-4o", agent_image=AGENT, tasks=("ispm-001", "ispm-004"))
    earlier_run(tmp_path, "c-other", candidate="openai/gpt-4o", agent_image="other/agent:1", tasks=("ispm-002",) * 2)
    (tmp_path / "d-broken").mkdir()
    (tmp_path / "d-broken" / RECORD_NAME).write_text("{not a record", encoding="utf-8")
    return tmp_path


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY)


def preflight(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["preflight", "--no-dry-run", "--judge", "openai/gpt-4.1-mini", *args])
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    return result.output.strip().splitlines()


def test_preflight_projects_the_candidate_from_its_agents_earlier_calibration_samples(
    provider_env: FakeProvider, runs: Path
) -> None:
    lines = preflight("--candidate", "openai/gpt-4o", "--agent-image", AGENT, "--runs", str(runs))
    line = next(x for x in lines if x.startswith("projected cost of the candidate"))
    assert f"{usd_text(CHEAP)} to {usd_text(DEAR)} over 635 samples" in line, line
    assert f"{500 * PLANNED:,} in / {80 * PLANNED:,} out tokens to {1027 * PLANNED:,} in" in line
    assert "of 2 calibration-task samples of example/fixture-agent:1 in 1 earlier run(s)" in line
    # Nothing was spent on the projection: one probe per model, as without it.
    assert len(provider_env.seen) == 2


def test_preflight_json_carries_the_candidates_projection(provider_env: FakeProvider, runs: Path) -> None:
    args = ("--candidate", "openai/gpt-4o", "--agent-image", AGENT, "--runs", str(runs), "--json")
    payload = json.loads("\n".join(preflight(*args)))
    projection = payload[0]["projection"]
    assert payload[0]["role"] == "candidate" and projection["runs"] == ["a-calibration"]
    assert projection["low"]["usd"] == pytest.approx(CHEAP) and projection["high"]["usd"] == pytest.approx(DEAR)
    assert projection["high_tokens"]["cached_tokens"] == 296 * PLANNED


def test_a_model_the_price_data_does_not_know_is_projected_in_tokens_with_a_note(
    provider_env: FakeProvider, runs: Path
) -> None:
    lines = preflight("--candidate", "openai/gpt-scripted-1", "--agent-image", AGENT, "--runs", str(runs))
    at = next(i for i, x in enumerate(lines) if x.startswith("projected cost of the candidate"))
    assert "tokens only to tokens only" in lines[at] and f"{1027 * PLANNED:,} in" in lines[at]
    assert lines[at + 1] == (
        "  note: openai/gpt-scripted-1: not in genai-prices 0.2.3, price data of 2026-11, tokens only"
    )


def test_without_an_earlier_run_of_the_agent_preflight_says_the_candidates_cost_is_not_known(
    provider_env: FakeProvider, runs: Path
) -> None:
    lines = preflight("--candidate", "openai/gpt-4o", "--agent-image", "never/ran:1", "--runs", str(runs))
    assert lines[-1].startswith("projected cost of the candidate: not known before its agent runs (no earlier run")
    assert "ispm-002, ispm-003, ispm-005" in lines[-1]


def test_ispm_runs_preflight_adds_the_candidate_to_the_judges_for_the_runs_range(runs: Path) -> None:
    judge = JudgeDryRun(
        judge="openai/gpt-4o",
        samples=6,
        calls=6,
        input_tokens=6000,
        output_tokens=600,
        latency_s=1.0,
        projected_samples=PLANNED,
        projected_input_tokens=PLANNED * 1000,
        projected_output_tokens=PLANNED * 100,
        sample_input_tokens=(1000, 1000),
        sample_output_tokens=(100, 100),
    )
    lines = candidate_projection_lines("openai/gpt-4o", AGENT, PLANNED, [judge], runs)
    judges = by_hand(1000, 0, 100) * PLANNED
    assert lines[-1] == (
        f"projected cost of the run (candidate and judges): {usd_text(CHEAP + judges)} to {usd_text(DEAR + judges)}"
    )
