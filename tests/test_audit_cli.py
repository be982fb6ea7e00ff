"""``ispm audit`` and ``ispm bundle`` through click: exit codes, JSON output, and the bundle round trip.

The run is the session's shared gold calibration run (``gold_run`` in conftest), copied before any edit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLD_RUN_EPOCHS, GOLD_RUN_TASKS

from runner.cli import main

SAMPLES = len(GOLD_RUN_TASKS) * GOLD_RUN_EPOCHS


@pytest.fixture(scope="module")
def finished_run(gold_run: Path) -> Path:
    return gold_run


@pytest.mark.docker
def test_audit_of_a_clean_run_exits_0(finished_run: Path) -> None:
    result = CliRunner().invoke(main, ["audit", str(finished_run)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("ok: run ")


@pytest.mark.docker
def test_audit_json_of_an_edited_record_exits_1_and_lists_the_path(finished_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    record["samples_graded"] += 1
    (run_dir / "record.json").write_text(json.dumps(record))
    result = CliRunner().invoke(main, ["audit", str(run_dir), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert f"record: samples_graded: {SAMPLES + 1} != {SAMPLES}" in report["problems"]


@pytest.mark.docker
def test_bundle_then_audit_the_bundle(finished_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "submission.tar.gz"
    result = CliRunner().invoke(main, ["bundle", str(finished_run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out.resolve())
    result = CliRunner().invoke(main, ["audit", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True


def test_audit_of_a_folder_without_a_journal_exits_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", str(tmp_path)])
    assert result.exit_code == 1
    assert "cannot read the journal" in result.output
