"""Real runs for the report and leaderboard tests, each made by ``start_run`` and recorded from its journal.

- ``docker_replay``: a calibration run of the replay image in Docker (gold answers, reference judge, real coverage).
- ``docker_null``: the null calibration in Docker (scores 0).
- ``mixed``: a non-calibration run whose in-process backend answers some tasks with gold, some with nothing, one
  only on its first epoch, one by timing out with a hostile error, and one with hostile SQL in its answer.
- ``all_gold``: a non-calibration run answering every task with gold (ranks first).
- ``timed_out``: a run whose run limit passes mid-way: no score.

Import the fixtures you need into your module, as with ``fake_provider``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pytest
from inprocess_backend import InProcessBackend

from runner.contract import Answer, SampleOutput
from runner.grading.reference_judge import gold_answer
from runner.paths import tasks_dir
from runner.pipeline import run_calibration, start_run
from runner.run.calibration import CALIBRATION_JUDGES
from runner.run.spec import RunSpec
from runner.sandbox.backend import SampleSpec
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth

TRUTH = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
BY_ID: dict[str, Task] = {t.id: t for t in load_tasks(tasks_dir())}

# Chosen to spread over every vendor, both kinds, several categories and all three hop counts.
DOCKER_TASKS = ["ispm-001", "ispm-019", "ispm-037", "ispm-073", "ispm-082", "ispm-100"]
MIXED_TASKS = [
    "ispm-001",
    "ispm-010",
    "ispm-019",
    "ispm-037",
    "ispm-046",
    "ispm-055",
    "ispm-073",
    "ispm-082",
    "ispm-100",
    "ispm-118",
]
HOSTILE_SQL = "SELECT '</pre><script>window.pwned = 1</script>' AS x"
HOSTILE_ERROR = "agent wrote <img src=x onerror=alert(1)> then hung"
Plan = Literal["gold", "nothing", "first_epoch_only", "timeout", "hostile_sql"]
MIXED_PLAN: dict[str, Plan] = {
    "ispm-046": "nothing",
    "ispm-082": "nothing",
    "ispm-055": "first_epoch_only",
    "ispm-073": "timeout",
    "ispm-118": "hostile_sql",
}


class ScriptedBackend(InProcessBackend):
    """Answers every sample in-process, by a plan per task (gold unless the plan says otherwise)."""

    name = "scripted"
    isolates = True

    def __init__(self, plan: Mapping[str, Plan], *, delay_s: float = 0.0) -> None:
        self.plan = plan
        self.delay_s = delay_s

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        time.sleep(self.delay_s)
        plan = self.plan.get(spec.task_id, "gold")
        if plan == "timeout":
            return SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="timeout", error=HOSTILE_ERROR)
        task = BY_ID[spec.task_id]
        gold = gold_answer(task, TRUTH[task.id])
        if plan == "nothing" or (plan == "first_epoch_only" and spec.epoch > 1):
            answer = Answer(response="nothing found")
        elif plan == "hostile_sql":
            answer = gold.model_copy(update={"queries": [*gold.queries, HOSTILE_SQL]})
        else:
            answer = gold
        return SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="ok", answer=answer)


def scripted_spec(tasks: list[str], *, epochs: int = 2, run_limit_s: float = 43_200.0) -> RunSpec:
    """A non-calibration, non-official run judged by the reference judge in both slots (no model, no key)."""
    return RunSpec(
        agent_image="example/scripted-agent:1",
        candidate=None,
        judges=CALIBRATION_JUDGES,
        epochs=epochs,
        concurrency=1,
        run_limit_s=run_limit_s,
        tasks=tasks,
        backend="local",
    )


def _folder(factory: pytest.TempPathFactory, name: str) -> Path:
    return factory.mktemp(name) / "run"


@pytest.fixture(scope="session")
def docker_replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = _folder(tmp_path_factory, "replay")
    run_calibration("replay", tasks=DOCKER_TASKS, epochs=2, run_dir=run_dir)
    return run_dir


@pytest.fixture(scope="session")
def docker_null(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = _folder(tmp_path_factory, "null")
    run_calibration("null", tasks=DOCKER_TASKS[:3], run_dir=run_dir)
    return run_dir


@pytest.fixture(scope="session")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = _folder(tmp_path_factory, "mixed")
    start_run(scripted_spec(MIXED_TASKS), run_dir, backend=ScriptedBackend(MIXED_PLAN), images={})
    return run_dir


@pytest.fixture(scope="session")
def all_gold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = _folder(tmp_path_factory, "gold")
    start_run(scripted_spec(MIXED_TASKS[:4], epochs=1), run_dir, backend=ScriptedBackend({}), images={})
    return run_dir


@pytest.fixture(scope="session")
def timed_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = _folder(tmp_path_factory, "timed_out")
    spec = scripted_spec(MIXED_TASKS[:4], run_limit_s=0.6)
    start_run(spec, run_dir, backend=ScriptedBackend({}, delay_s=0.25), images={})
    return run_dir
