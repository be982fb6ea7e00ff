"""`make official-run` says exactly what is missing before it does anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARS = ("AGENT_IMAGE", "CANDIDATE", "JUDGE_A", "JUDGE_B")


def _make(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in VARS}
    return subprocess.run(["make", "--no-print-directory", "official-env"], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_official_run_names_every_missing_variable() -> None:
    result = _make(CANDIDATE="openai/gpt-4.1")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines == [
        "AGENT_IMAGE is not set: export AGENT_IMAGE=<your agent image, e.g. ispm/agent-reference:latest>",
        "JUDGE_A is not set: export JUDGE_A=<first judge, e.g. anthropic/claude-sonnet-4-6>",
        "JUDGE_B is not set: export JUDGE_B=<second judge, e.g. openai/gpt-4.1>",
    ]


def test_official_run_passes_the_check_when_all_are_set() -> None:
    result = _make(AGENT_IMAGE="me/agent:1", CANDIDATE="openai/gpt-4.1", JUDGE_A="a/b", JUDGE_B="c/d")
    assert result.returncode == 0, result.stdout + result.stderr
