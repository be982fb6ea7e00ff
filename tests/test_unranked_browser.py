"""The leaderboard in a real headless Chromium gives the reason for every unranked run.

Five runs, all made in-process: a healthy one (ranked), one stopped by the judge breaker, one whose judge failed
on a third of its samples (unhealthy), one that timed out and a calibration run. Chromium loads the page over
``file://`` and reads each row's note as a person would see it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from breaker_runs import judges, stopped, unhealthy
from chromium import screenshot
from report_runs import MIXED_TASKS, ScriptedBackend, all_gold, timed_out
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from test_report_browser import browser

from runner.pipeline import start_run
from runner.record.build import load_record
from runner.record.leaderboard import LEADERBOARD_NAME, write_leaderboard
from runner.run.calibration import calibration_spec

__all__ = ["all_gold", "browser", "judges", "stopped", "timed_out", "unhealthy"]  # fixtures, imported for pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def calibration(tmp_path: Path) -> Path:
    run_dir = tmp_path / "calibration"
    spec = calibration_spec("null", tasks=MIXED_TASKS[:2], backend="local")
    start_run(spec, run_dir, backend=ScriptedBackend(dict.fromkeys(MIXED_TASKS[:2], "nothing")), images={})
    return run_dir


def test_the_leaderboard_shows_why_each_run_is_unranked(
    browser: WebDriver,
    all_gold: Path,
    stopped: Path,
    unhealthy: Path,
    timed_out: Path,
    calibration: Path,
    tmp_path: Path,
) -> None:
    runs = [all_gold, stopped, unhealthy, timed_out, calibration]
    out, _ = write_leaderboard(runs, tmp_path / LEADERBOARD_NAME)
    records = [load_record(r) for r in runs]
    browser.get(out.as_uri())
    notes = {
        row.get_attribute("data-run"): (
            row.find_element(By.CSS_SELECTOR, "td.rank").text,
            row.find_element(By.CSS_SELECTOR, "td.note").text,
        )
        for row in browser.find_elements(By.CSS_SELECTOR, "tr.run")
        if row.is_displayed()
    }
    assert notes == {r.run_id: ("1" if r.unranked_reason is None else "–", r.unranked_reason or "") for r in records}
    reasons = [r.unranked_reason for r in records]
    assert reasons[0] is None
    assert reasons[1] is not None and reasons[1].startswith("Stopped by a circuit breaker: judge openai/judge-b: ")
    assert reasons[2] is not None and reasons[2].startswith("Not rankable, unhealthy run: judge openai/judge-a ")
    assert reasons[3] is not None and reasons[3].startswith("Timed out: the run limit passed")
    assert reasons[4] == "Harness calibration (null): not a model score."
    screenshot(browser, tmp_path / "unranked.png")
