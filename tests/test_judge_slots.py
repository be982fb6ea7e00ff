"""Every command takes its judges the same way (``runner.cli.judges``): the slots of a run regrade one of its samples
exactly as the run graded it, and two slots with one alias are refused in the same words by every command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main
from runner.contract import SampleOutput
from runner.grading.grade import GradingContext, grade_sample, make_judges
from runner.grading.reference_judge import gold_answer
from runner.paths import tasks_dir, world_dir
from runner.run.calibration import calibration_spec
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth
from runner.world import SNAPSHOT_NAME

TASK = "ispm-002"
SAME_ALIAS = "Error: judges: the two judge slots need distinct aliases (use ref#1 and ref#2), got ['ref', 'ref']\n"


@pytest.fixture(scope="module")
def gold_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    task = next(t for t in load_tasks(tasks_dir()) if t.id == TASK)
    truth = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks[TASK]
    path = tmp_path_factory.mktemp("sample") / f"{TASK}.json"
    path.write_text(SampleOutput(task_id=TASK, epoch=1, status="ok", answer=gold_answer(task, truth)).model_dump_json())
    return path


def as_the_run_grades(sample_path: Path, slots: tuple[str, str]) -> str:
    """The grade summary of the sample with the run's judges (``make_judges``, as ``runner.pipeline`` makes them)."""
    sample = SampleOutput.model_validate_json(sample_path.read_bytes())
    task = next(t for t in load_tasks(tasks_dir()) if t.id == sample.task_id)
    truth = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks[sample.task_id]
    with GradingContext(world_dir() / SNAPSHOT_NAME) as context:
        graded = grade_sample(task, truth, sample, make_judges(slots, context.rubrics), 1, context=context)
    return "".join(f"{line}\n" for line in graded.summary_lines())


def test_grade_takes_a_calibration_runs_reference_slots_and_grades_as_the_run_did(gold_sample: Path) -> None:
    slots = calibration_spec("replay").judges
    result = CliRunner().invoke(main, ["grade", str(gold_sample), "--judge", slots[0], "--judge", slots[1]])
    assert (result.exit_code, result.stderr, result.stdout) == (0, "", as_the_run_grades(gold_sample, slots))


def test_each_vote_of_a_regrade_names_its_reference_slot(gold_sample: Path) -> None:
    result = CliRunner().invoke(main, ["grade", str(gold_sample), "--judge", "ref#1", "--judge", "ref#2"])
    votes = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("ref")]
    assert votes == ["ref#1"] * 6 + ["ref#2"] * 6


@pytest.mark.parametrize(
    "command",
    [["grade", "SAMPLE"], ["preflight", "--candidate", "openai/gpt-4.1"], ["run", "--agent-image", "null"]],
    ids=["grade", "preflight", "run"],
)
def test_every_command_refuses_two_slots_with_one_alias_in_the_same_words(
    gold_sample: Path, command: list[str]
) -> None:
    args = [str(gold_sample) if a == "SAMPLE" else a for a in command]
    result = CliRunner().invoke(main, [*args, "--judge", "ref", "--judge", "ref"])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", SAME_ALIAS)


def test_preflight_probes_no_reference_slot() -> None:
    # An unknown candidate fails before any request is sent; the reference slot is not named as a model at all.
    result = CliRunner().invoke(main, ["preflight", "--candidate", "nope/x", "--judge", "ref#1"])
    assert (result.exit_code, result.stdout, result.stderr) == (
        1,
        "",
        "Error: preflight failed:\n  - unknown model reference 'nope/x': write provider/model, with provider one of "
        "anthropic, azure, google, groq, ollama, openai, openrouter, together, vllm\n",
    )
