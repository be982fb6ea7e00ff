"""Calibration runs: the harness validating itself (``make demo``).

The replay agent replays the gold answer of every task and must score 100% answer correctness; the null
agent answers nothing and must score 0%. Both use the offline reference judge in both slots (``ref#1`` and
``ref#2``: the slots need distinct aliases) and no model, so they need no API key. They are never official:
Official runs (docs/scoring.md, section 6) are 5 epochs with two floating model judges; the demo defaults to 1 epoch.
"""

from __future__ import annotations

from typing import Literal

from runner.run.spec import Calibration, RunSpec

CALIBRATION_JUDGES = ("ref#1", "ref#2")
_BUILT_IN: dict[str, Calibration] = {"replay": "replay", "agent-replay": "replay", "null": "null", "agent-null": "null"}


def calibration_of(agent_image: str) -> Calibration | None:
    """``replay`` or ``null`` when ``agent_image`` names our calibration agent (``replay``, ``agent-replay``, ...):
    a run of it is a calibration, whatever command starts it, so the replay agent gets its gold recordings."""
    return _BUILT_IN.get(agent_image)


def calibration_spec(
    agent: Literal["replay", "null"],
    *,
    epochs: int = 1,
    concurrency: int = 2,
    tasks: list[str] | None = None,
    backend: Literal["docker", "local"] = "docker",
    run_limit_s: float = 43_200.0,
) -> RunSpec:
    """The spec of a gold (``replay``) or null calibration run."""
    return RunSpec(
        agent_image=agent,
        candidate=None,
        judges=CALIBRATION_JUDGES,
        epochs=epochs,
        concurrency=concurrency,
        run_limit_s=run_limit_s,
        tasks=tasks,
        backend=backend,
        calibration=agent,
    )
