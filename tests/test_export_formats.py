"""``ispm export`` checked by the formats' own tools: every ATIF trajectory validates against the ``atif`` package's
models (ATIF v1.8), and the Inspect log loads with ``inspect_ai.log.read_eval_log``, goes through ``inspect view
bundle``, which lists it as the viewer does, and is listed and opened by the viewer's own server (``inspect view
start``, on loopback, asked through its API as the viewer's page asks it). The viewer's page itself, in Debian's
headless chromium, shows the sample's conversation, its scores per dimension and its model usage.

Runs: the hand-written one of ``trace_runs`` (a transcript, and the same run without one), and ``report_runs.mixed``
(a real run with gold answers, empty ones, timeouts and hostile SQL, and no model at all).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import atif
import httpx
import pytest
from chromium import open_chromium, screenshot
from inspect_ai.log import read_eval_log
from report_runs import MIXED_TASKS, mixed
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.command import Command
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from trace_runs import AGENT_SAYS, KEY, PROMPT, REPLY, RESULT, SQL, SYSTEM, task_set, write_run

from runner.record.build import load_record
from runner.trace.export import write_atif, write_inspect
from runner.trace.text import PROVENANCE

__all__ = ["mixed"]  # a fixture, imported for pytest
INSPECT = Path(sys.executable).with_name("inspect")
TASKS = task_set()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("export") / "run")


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("export") / "bare", with_transcript=False)


def _trajectories(run_dir: Path, out: Path) -> list[atif.Trajectory]:
    return [atif.Trajectory.model_validate_json(p.read_text(encoding="utf-8")) for p in write_atif(run_dir, out, TASKS)]


def test_a_trajectory_holds_the_conversation_the_host_saw(run: Path, tmp_path: Path) -> None:
    (doc,) = _trajectories(run, tmp_path)
    assert (doc.schema_version, doc.session_id) == ("ATIF-v1.8", "20261201T090000Z-trace")
    assert [(s.step_id, s.source) for s in doc.steps] == [
        (1, "system"), (2, "user"), (3, "agent"), (4, "agent"), (5, "system"),
    ]  # fmt: skip
    system, user, first, second, answer = doc.steps
    assert (system.message, user.message, first.message) == (SYSTEM, PROMPT, REPLY)
    assert first.timestamp == "2026-12-01T09:00:01Z" and first.model_name == "claude-x-2026"
    assert first.tool_calls is not None and first.tool_calls[0].arguments == {"sql": SQL}
    assert first.observation is not None and first.observation.results[0].source_call_id == "toolu_1"
    assert first.metrics is not None and (first.metrics.prompt_tokens, first.metrics.cached_tokens) == (120, 100)
    assert first.extra is not None and [q["sql"] for q in first.extra["queries"]] == [
        SQL,
        "SELECT nope FROM okta_users",
    ]
    assert second.message == "Done." and second.observation is None
    said = answer.message
    assert isinstance(said, str) and said.startswith("The host collected the answer (status ok): Nobody")
    ispm = (doc.extra or {})["ispm"]
    assert (ispm["task_id"], ispm["epoch"], len(ispm["votes"])) == (KEY.task_id, KEY.epoch, 4)
    assert ispm["agent_reported_trace"][1] == {"type": "result", "subtype": AGENT_SAYS}
    # Who wrote what: the SQL was logged inside the sandbox, each statement marked as the host's replay found it.
    assert ispm["provenance"] == PROVENANCE
    assert [(q["logged_by"], q["replay"]["finding"]) for q in first.extra["queries"]] == [
        ("sql_tool_in_sandbox", "same"),
        ("sql_tool_in_sandbox", "not_replayed"),
    ]


def test_without_a_transcript_the_calls_are_figures_and_the_sql_hangs_on_the_last(bare: Path, tmp_path: Path) -> None:
    (doc,) = _trajectories(bare, tmp_path)
    assert [s.source for s in doc.steps] == ["user", "agent", "agent", "system"]
    prompt = doc.steps[0].message
    assert isinstance(prompt, str) and prompt.startswith("HR shows a number of people")  # the task's prompt
    assert [s.extra["content"] for s in doc.steps[1:3] if s.extra] == ["none", "none"]
    assert doc.notes is not None and "no transcript" in doc.notes


def test_every_sample_of_a_run_without_a_model_exports_and_validates(mixed: Path, tmp_path: Path) -> None:
    docs = _trajectories(mixed, tmp_path)
    record = load_record(mixed)
    assert len(docs) == len(record.samples) == len(MIXED_TASKS) * 2
    timed_out = next(d for d in docs if (d.extra or {})["ispm"]["status"] == "timeout")
    last = timed_out.steps[-1].message
    assert isinstance(last, str) and last.startswith("The host collected the answer (status timeout): (no answer)")


def test_the_inspect_log_loads_with_messages_scores_and_usage(run: Path, tmp_path: Path) -> None:
    log = read_eval_log(str(write_inspect(run, tmp_path, TASKS)))
    assert (log.version, log.status, log.eval.task, log.eval.model) == (
        2, "success", "runner/ispm_enterprise_sql", "anthropic/claude-x",
    )  # fmt: skip
    assert log.samples is not None
    (sample,) = log.samples
    assert (sample.id, sample.epoch, sample.input) == (KEY.task_id, 1, log.samples[0].input)
    assert [m.role for m in sample.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert sample.messages[2].text == REPLY and sample.messages[3].text == "status | n\nACTIVE | 1224"
    assert sample.scores is not None and {name: s.value for name, s in sample.scores.items()} == {
        "ispm_scorer": {"answer_correctness": 0.0, "reasoning_utility": None},
    }  # fmt: skip
    assert "ref#2: incorrect: recall 0.00 (0/18)" in (sample.scores["ispm_scorer"].explanation or "")
    usage = sample.model_usage["anthropic/claude-x"]
    assert (usage.input_tokens, usage.input_tokens_cache_read, usage.output_tokens) == (220, 100, 35)
    judge = sample.model_usage["openai/judge-x"]  # the judge's call, under its alias
    assert (judge.input_tokens, judge.output_tokens) == (50, 9)
    assert log.results is not None
    means = {s.name: s.metrics["scored_mean"].value for s in log.results.scores if "scored_mean" in s.metrics}
    assert means == {"answer_correctness": 0.0}
    assert sample.metadata["provenance"] == PROVENANCE
    assert [(q["sql"], q["logged_by"], q["replay"]) for q in sample.metadata["sql_logged"]] == [
        (SQL, "sql_tool_in_sandbox", {"finding": "same", "detail": None}),
        (
            "SELECT nope FROM okta_users",
            "sql_tool_in_sandbox",
            {"finding": "not_replayed", "detail": "the sample's analysis budget was spent"},
        ),
    ]


def test_a_run_with_failures_loads_with_each_failure_as_the_samples_error(mixed: Path, tmp_path: Path) -> None:
    log = read_eval_log(str(write_inspect(mixed, tmp_path, TASKS)))
    assert log.samples is not None and len(log.samples) == len(MIXED_TASKS) * 2
    failed = [s for s in log.samples if s.error is not None]
    assert {s.id for s in failed} == {"ispm-073"}
    assert failed[0].error is not None and "onerror=alert(1)" in failed[0].error.message


@pytest.mark.slow
def test_inspect_view_bundles_the_log_and_lists_it(run: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    written = write_inspect(run, logs, TASKS)
    bundle = tmp_path / "bundle"
    done = subprocess.run(
        [str(INSPECT), "view", "bundle", "--log-dir", str(logs), "--output-dir", str(bundle)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listing = json.loads((bundle / "logs" / "listing.json").read_text(encoding="utf-8"))
    entry = listing[written.name]
    assert (entry["task"], entry["status"], entry["model"]) == (
        "runner/ispm_enterprise_sql",
        "success",
        "anthropic/claude-x",
    )
    assert (bundle / "logs" / written.name).read_bytes() == written.read_bytes()
    assert (bundle / "index.html").is_file()


@contextmanager
def _inspect_view(logs: Path) -> Iterator[str]:
    """``inspect view start`` on ``logs``, on a free loopback port: its address, once its API answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    viewer = subprocess.Popen(
        [str(INSPECT), "view", "start", "--log-dir", str(logs), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                httpx.get(f"{base}/api/log-files", timeout=5).raise_for_status()
                break
            except httpx.TransportError:
                assert viewer.poll() is None and time.monotonic() < deadline, "inspect view did not start"
                time.sleep(0.5)
        yield base
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)


@pytest.mark.slow
def test_the_inspect_viewers_own_server_lists_and_opens_the_log(run: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    written = write_inspect(run, logs, TASKS)
    with _inspect_view(logs) as viewer:
        base = f"{viewer}/api"
        listing = httpx.get(f"{base}/log-files", timeout=5).json()
        (entry,) = listing["files"]
        assert entry["name"] == written.as_uri()
        opened = httpx.get(f"{base}/logs/{quote(entry['name'], safe='')}", timeout=60)
        assert opened.status_code == 200
        log = opened.json()
        assert (log["eval"]["task"], log["status"], len(log["samples"])) == ("runner/ispm_enterprise_sql", "success", 1)
        assert [m["role"] for m in log["samples"][0]["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
        ]


def _page_lines(driver: WebDriver, *needles: str) -> list[str]:
    """The lines the page shows, once they hold every one of ``needles`` (at most a minute, the machine may be busy)."""

    def text(d: WebDriver) -> str:
        return str(d.find_element(By.TAG_NAME, "body").text)

    try:
        WebDriverWait(driver, 60, poll_frequency=0.25).until(lambda d: all(n in text(d) for n in needles))
    except TimeoutException:
        pytest.fail(f"the viewer never showed {needles!r}; it shows:\n{text(driver)}")
    return text(driver).splitlines()


@pytest.mark.slow
@pytest.mark.browser
def test_the_inspect_viewers_page_shows_the_samples_conversation_scores_and_usage(run: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    written = write_inspect(run, logs, TASKS)
    with _inspect_view(logs) as viewer, open_chromium(1280, 1400) as browser:
        log_url = f"{viewer}/#/logs/{quote(written.name)}"
        browser.get(log_url)
        lines = _page_lines(browser, "runner/ispm_enterprise_sql", "SCORERS")
        assert written.name in lines  # the breadcrumb: this log, not an empty listing
        assert lines[lines.index("SCORERS") + 1] == "answer_correctness, reasoning_utility"
        assert "answer_correctness (runner/ispm_consensus) 0.0" in lines  # the metric, under inspect eval's reducer

        sample_url = f"{log_url}/samples/sample/{KEY.task_id}/{KEY.epoch}/"
        browser.get(sample_url)  # with no events in the log, the viewer opens the Messages tab
        lines = _page_lines(browser, PROMPT, "Done.")
        assert f"Sample {KEY.task_id} (Epoch {KEY.epoch})" in lines
        first = lines.index("ANSWER_CORRECTNESS")
        # As the viewer shows an `inspect eval` score: the numbers, and nothing for a dimension that abstained.
        assert lines[first : first + 4] == ["ANSWER_CORRECTNESS", "0", "REASONING_UTILITY", "TRANSCRIPT"]
        assert lines[lines.index("SYSTEM") :] == [
            "SYSTEM", "1", SYSTEM,
            "USER", "2", PROMPT,
            "ASSISTANT", "3", REPLY,
            "4", "run_sql", f'sql: "{SQL}"', *RESULT.splitlines(),
            "ASSISTANT", "5", "Done.",
        ]  # fmt: skip
        assert browser.execute_script("return window.pwned === undefined") is True  # the reply's script is text
        screenshot(browser, tmp_path / "inspect-view-messages.png")

        browser.get(f"{sample_url}info")  # the sample's usage, per model, candidate and judge
        lines = _page_lines(browser, "USAGE", "openai/judge-x")
        usage = lines[lines.index("USAGE") : lines.index("METADATA")]
        assert usage[usage.index("anthropic/claude-x") :] == [
            "anthropic/claude-x", "355tokens", "28% cache read", "10% output",
            "Input", "220", "Cache read", "100", "Output", "35",
            "openai/judge-x", "59tokens", "0% cache read", "15% output",
            "Input", "50", "Output", "9",
        ]  # fmt: skip
        screenshot(browser, tmp_path / "inspect-view-usage.png")
        console = browser.execute(Command.GET_LOG, {"type": "browser"})["value"]  # what Chrome's get_log asks
        errors = [e["message"] for e in console if e["level"] == "SEVERE"]
        assert errors == [], errors  # no failed request, no script error
