"""The report and the leaderboard in a real headless Chromium (Debian's ``chromium`` and ``chromedriver``).

Each test loads a page over ``file://``, uses its filters as a person would, checks what is visible against counts
computed from the record in Python, and saves a screenshot. Selenium is pointed at Debian's chromedriver explicitly,
so it never downloads a driver (``make browser`` installs both packages).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from chromium import open_chromium, screenshot
from report_runs import all_gold, docker_null, docker_replay, mixed, timed_out
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from runner.record.build import load_record
from runner.record.leaderboard import LEADERBOARD_NAME, write_leaderboard
from runner.record.model import RunRecord
from runner.record.report import REPORT_NAME

__all__ = ["all_gold", "docker_null", "docker_replay", "mixed", "timed_out"]  # fixtures, imported for pytest

pytestmark = pytest.mark.browser
SHOT_FOR_PEOPLE = Path("/tmp/ispm-report.png")


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with open_chromium(1500, 1100) as driver:
        yield driver


def _visible_tasks(browser: WebDriver) -> list[str]:
    return [
        e.get_attribute("id") or "" for e in browser.find_elements(By.CSS_SELECTOR, "details.task") if e.is_displayed()
    ]


def _expected(record: RunRecord, **wanted: str) -> list[str]:
    """The tasks a filter should leave, computed from the record's own task rows."""
    assert record.scores is not None
    rows = record.scores.tasks
    keep = []
    for r in rows:
        values = {"vendor": r.vendors, "kind": [r.kind], "category": [r.category], "hops": [str(r.hops)]}
        if all(v in values[axis] for axis, v in wanted.items()):
            keep.append(f"task-{r.task_id}")
    return keep


def _check_filters(browser: WebDriver, record: RunRecord, first: tuple[str, str], second: tuple[str, str]) -> None:
    everything = _expected(record)
    assert _visible_tasks(browser) == everything
    Select(browser.find_element(By.ID, f"filter-{first[0]}")).select_by_value(first[1])
    one = _expected(record, **dict([first]))
    assert 0 < len(one) < len(everything), "pick a filter value that hides some tasks"
    assert _visible_tasks(browser) == one
    assert browser.find_element(By.ID, "shown-count").text == str(len(one))
    Select(browser.find_element(By.ID, f"filter-{second[0]}")).select_by_value(second[1])
    both = _expected(record, **dict([first, second]))
    assert _visible_tasks(browser) == both
    assert browser.find_element(By.ID, "shown-count").text == str(len(both))


def _expand_and_check_grid(browser: WebDriver, record: RunRecord, task_id: str) -> None:
    task = browser.find_element(By.ID, f"task-{task_id}")
    grid = task.find_elements(By.CSS_SELECTOR, "table.votes")
    assert grid and not grid[0].is_displayed(), "the grid shows before the task is opened"
    task.find_element(By.TAG_NAME, "summary").click()
    assert task.get_attribute("open") is not None
    samples = [s for s in record.samples if s.task_id == task_id]
    tables = task.find_elements(By.CSS_SELECTOR, "table.votes")
    assert len(tables) == len(samples) and all(t.is_displayed() for t in tables)
    dims = {v.dimension for v in samples[0].votes}
    assert len(tables[0].find_elements(By.CSS_SELECTOR, "tr[data-dimension]")) == len(dims)
    rationale = samples[0].votes[0].rationale
    assert rationale.split()[0] in tables[0].text


def test_the_mixed_report_filters_and_expands(browser: WebDriver, mixed: Path, tmp_path: Path) -> None:
    record = load_record(mixed)
    browser.get((mixed / REPORT_NAME).as_uri())
    assert record.run_id in browser.title
    _check_filters(browser, record, ("vendor", "azure"), ("kind", "verdict"))
    _expand_and_check_grid(browser, record, "ispm-055")  # in both filters; right on one epoch, wrong on the other
    # Hostile SQL stays text: the page never ran it.
    assert browser.execute_script("return window.pwned === undefined") is True
    browser.execute_script("window.scrollTo(0, document.getElementById('tasks').offsetTop - 50)")
    shot = screenshot(browser, tmp_path / "mixed-report.png")
    shutil.copyfile(shot, SHOT_FOR_PEOPLE)


@pytest.mark.docker
def test_a_docker_calibration_report_filters_by_hops_and_category(
    browser: WebDriver, docker_replay: Path, tmp_path: Path
) -> None:
    record = load_record(docker_replay)
    browser.get((docker_replay / REPORT_NAME).as_uri())
    assert "NOT a model score" in browser.find_element(By.ID, "calibration-banner").text
    _check_filters(browser, record, ("hops", "2"), ("vendor", "hibob"))
    _expand_and_check_grid(browser, record, "ispm-001")
    assert "table recall" in browser.find_element(By.ID, "task-ispm-001").text
    # The scoring link jumps to the embedded page, which works offline.
    browser.find_element(By.ID, "scoring-link").click()
    assert browser.execute_script("return location.hash") == "#scoring"
    assert browser.find_element(By.ID, "scoring").is_displayed()
    screenshot(browser, tmp_path / "replay-report.png")


def test_the_leaderboard_filters_and_sorts(
    browser: WebDriver, mixed: Path, all_gold: Path, timed_out: Path, tmp_path: Path
) -> None:
    runs = [mixed, all_gold, timed_out]
    out, rows = write_leaderboard(runs, tmp_path / LEADERBOARD_NAME)
    records = {load_record(r).run_id: load_record(r) for r in runs}
    browser.get(out.as_uri())

    def visible() -> list[str]:
        return [
            e.get_attribute("data-run") or ""
            for e in browser.find_elements(By.CSS_SELECTOR, "tr.run")
            if e.is_displayed()
        ]

    assert visible() == [r.record.run_id for r in rows]
    scored = sorted(
        (rid for rid, rec in records.items() if rec.scores is not None),
        key=lambda rid: -(records[rid].scores.dimensions["answer_correctness"].mean or 0.0),  # type: ignore[union-attr]
    )
    assert visible()[: len(scored)] == scored
    browser.find_element(By.ID, "ranked-only").click()
    assert visible() == scored
    assert browser.find_element(By.ID, "shown-count").text == str(len(scored))
    # Sort by answer_correctness, lowest first, then back.
    head = browser.find_element(By.XPATH, "//table[@id='leaderboard']//th[normalize-space()='answer_correctness']")
    head.click()
    assert visible() == scored[::-1]
    head.click()
    assert visible() == scored
    browser.find_element(By.ID, "ranked-only").click()
    browser.find_element(By.ID, "official-only").click()
    assert visible() == [rid for rid, rec in records.items() if rec.official]
    browser.find_element(By.ID, "official-only").click()
    assert len(visible()) == len(runs)
    no_score = next(r for r in records if r not in scored)
    unranked = browser.find_element(By.CSS_SELECTOR, f"tr[data-run='{no_score}']")
    assert "No score" in unranked.text
    screenshot(browser, tmp_path / "leaderboard.png")
