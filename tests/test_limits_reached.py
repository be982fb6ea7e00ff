"""A sample that reached a sandbox limit says so in the record and in the report, whatever its status; a sample
that reached none adds nothing to ``record.json`` (records of earlier runs rebuild to the same bytes:
test_v1_formats). The sandbox side, with real containers, is in test_hostile."""

from __future__ import annotations

import json
from pathlib import Path

from runner.paths import scoring_doc, tasks_dir
from runner.record.build import build_record, write_record
from runner.record.report import render_report
from runner.run.journal import JOURNAL_NAME, read_entries
from runner.tasks.load import load_tasks

RUN = Path(__file__).resolve().parent / "fixtures" / "v1_runs" / "anthropic"


def _journal_with_limits(tmp_path: Path, task_id: str, limits: list[str]) -> Path:
    lines = (RUN / JOURNAL_NAME).read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        entry = json.loads(line)
        if entry["kind"] == "sample_finished" and entry["output"]["task_id"] == task_id:
            entry["output"]["limits_reached"] = limits
            line = json.dumps(entry, separators=(",", ":"))
        out.append(line)
    target = tmp_path / JOURNAL_NAME
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return target


def test_a_limit_reached_is_in_the_record_and_the_report_whatever_the_status(tmp_path: Path) -> None:
    tasks = load_tasks(tasks_dir())
    record = build_record(read_entries(_journal_with_limits(tmp_path, "ispm-001", ["pids", "output"])), tasks)
    samples = {s.task_id: s for s in record.samples}
    assert samples["ispm-001"].status == "ok"  # the agent exited 0: the limits are said all the same
    assert (samples["ispm-001"].limits_reached, samples["ispm-004"].limits_reached) == (["pids", "output"], [])

    written = json.loads(write_record(tmp_path, record).read_text(encoding="utf-8"))
    by_task = {s["task_id"]: s for s in written["samples"]}
    assert by_task["ispm-001"]["limits_reached"] == ["pids", "output"]
    assert "limits_reached" not in by_task["ispm-004"]  # none reached: nothing written

    page = render_report(record, tasks, scoring_doc().read_text(encoding="utf-8"))
    assert '<table id="limits-list">' in page
    assert (
        '<tr><td><a href="#task-ispm-001">ispm-001</a></td><td>1</td><td>ok</td>'
        "<td><code>pids</code>, <code>output</code></td></tr>"
    ) in page
    assert "sandbox limits reached: <code>pids</code>, <code>output</code></p>" in page
    assert page.count("sandbox limits reached:") == 1


def test_a_run_without_limits_reached_has_no_such_table(tmp_path: Path) -> None:
    tasks = load_tasks(tasks_dir())
    record = build_record(read_entries(RUN / JOURNAL_NAME), tasks)
    page = render_report(record, tasks, scoring_doc().read_text(encoding="utf-8"))
    assert "limits-list" not in page and "sandbox limits reached" not in page
