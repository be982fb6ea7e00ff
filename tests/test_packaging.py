"""One install ships the task set and the pinned world: the wheel works without the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_installed_wheel_finds_bundled_world_and_tasks(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
    )
    wheel = next((tmp_path / "dist").glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "runner/_bundle/world/ispm-crossvendor-v1.sqlite" in names
    assert "runner/_bundle/tasks/ground_truth.json" in names
    assert sum(n.startswith("runner/_bundle/tasks/v1/") for n in names) == 127
    assert "runner/_bundle/docs/scoring.md" in names  # every report embeds it
    assert "runner/record/templates/report.html.j2" in names
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)], check=True
    )
    # Run from an unrelated folder with the installed copy first on the path: no source tree in sight.
    env = {**os.environ, "PYTHONPATH": str(site), "ISPM_LOG_FILE": str(tmp_path / "log.jsonl")}
    code = (
        "import runner.paths as p; from runner.cli import main; "
        "assert '_bundle' in str(p.world_dir()), p.world_dir(); main(['tasks', 'verify'])"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "ok: 127 tasks match the world" in result.stdout
