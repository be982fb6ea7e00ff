"""A real Claude Code sample, read back: its timeline, its report page in headless Chromium, and its exports.

One run (``start_run``) of the real ``agent-claude-code`` image in the real locked-down sandbox, behind the real
gateway, whose candidate is the scripted provider on loopback (:mod:`fake_provider`), judged by the reference judge.
The script is a short investigation: a reply whose text carries a script tag, a Bash call of ``ispm-sql``, the
answer written by a second Bash call, and a last word. The checks: the timeline holds the calls, the SQL between the
first and second call, the answer and the votes, in that order; the sample page reads as a conversation in
Chromium with the script tag shown as text; the report links the page and does not grow with it; the ATIF and
Inspect exports load in their own libraries. A screenshot of the page is kept in ``/tmp/ispm-sample.png``.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import atif
import pytest
from chromium import open_chromium, screenshot
from claude_code_script import claude_code_turns, claude_responder
from fake_provider import FakeProvider, Usage, point_clients_at
from inspect_ai.log import read_eval_log
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway
from runner.paths import tasks_dir
from runner.pipeline import start_run
from runner.record.report import REPORT_NAME
from runner.run.calibration import CALIBRATION_JUDGES
from runner.run.spec import RunSpec
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ImageRef
from runner.tasks.load import load_tasks
from runner.trace.export import write_atif, write_inspect
from runner.trace.sample_page import SAMPLES_DIR
from runner.trace.timeline import AnswerStep, CallStep, QueryStep, SampleTimeline, VoteStep, read_timeline

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TASK_ID = "ispm-001"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
HOSTILE = "Counting Okta users by status. <script>window.pwned = 1</script>"
ANSWER = {
    "format": "ispm.answer/v1",
    "response": 'Scripted: counted Okta users by status. <img src=x onerror="window.pwned = 2">',
    "verdict": None,
    "evidence": [{"vendor": "okta", "kind": "account", "identifier": "00u-scripted", "fact": "It is scripted."}],
    "queries": [SQL],
}
TURNS = claude_code_turns(
    SQL,
    ANSWER,
    opening=HOSTILE,
    usages=(
        Usage(input_tokens=1201, output_tokens=41, cached_tokens=1000),
        Usage(input_tokens=1302, output_tokens=52, cached_tokens=1200),
        Usage(input_tokens=1403, output_tokens=13),
    ),
)
SETTINGS = ClientSettings(read_timeout=30.0, max_attempts=2, backoff_initial=0.01, backoff_max=0.05)
SHOT_FOR_PEOPLE = Path("/tmp/ispm-sample.png")
TASKS = load_tasks(tasks_dir())


@pytest.fixture(scope="module")
def run_dir(refs: dict[str, ImageRef], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("claude-trace") / "run"
    monkeypatch = pytest.MonkeyPatch()
    spec = RunSpec(
        agent_image=refs["agent-claude-code"].tag,
        candidate="anthropic/claude-scripted-1",
        judges=CALIBRATION_JUDGES,
        epochs=1,
        concurrency=1,
        sample_limit_s=90,
        tasks=[TASK_ID],
        backend="docker",
    )
    backend = DockerBackend(sweep_on_start=False)
    try:
        with FakeProvider() as fake:
            point_clients_at(monkeypatch, fake, "sk-trace-openai-unused", "sk-ant-trace-3f9d1c")
            fake.responder = claude_responder(TURNS)
            with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
                start_run(spec, folder, backend=backend, gateway=gateway, images={})
        yield folder
    finally:
        backend.close()
        monkeypatch.undo()


@pytest.fixture(scope="module")
def timeline(run_dir: Path) -> SampleTimeline:
    return read_timeline(run_dir, TASK_ID, 1)


def test_the_timeline_has_the_calls_then_the_sql_between_them_then_the_answer_and_votes(
    timeline: SampleTimeline,
) -> None:
    assert timeline.transcript == "kept" and timeline.status == "ok", timeline.notes
    kinds = [e.kind for e in timeline.events if isinstance(e, CallStep | QueryStep | AnswerStep)]
    assert kinds == ["model_call", "query", "model_call", "model_call", "answer"]
    first, second, _ = (e for e in timeline.events if isinstance(e, CallStep))
    assert first.reply is not None and HOSTILE in first.reply.parts[0].model_dump()["text"]
    query = next(e for e in timeline.events if isinstance(e, QueryStep))
    assert query.sql == SQL and query.error is None
    assert first.at is not None and query.at is not None and second.at is not None
    assert first.at < query.at < second.at
    # The second call sent back only the tool's result: the history is shown once.
    assert [m.role for m in second.sent] == ["user"]
    assert second.sent[0].parts[0].type == "tool_result"
    votes = [e for e in timeline.events if isinstance(e, VoteStep)]
    assert votes and timeline.events[-len(votes) :] == votes


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with open_chromium(1280, 1400) as driver:
        yield driver


@pytest.mark.browser
def test_the_sample_page_reads_as_a_conversation_in_chromium(
    browser: WebDriver, run_dir: Path, timeline: SampleTimeline, tmp_path: Path
) -> None:
    report = run_dir / REPORT_NAME
    browser.get(report.as_uri())
    link = browser.find_element(By.CSS_SELECTOR, f"#task-{TASK_ID} a.sample-link")
    assert link.get_attribute("href") == (run_dir / SAMPLES_DIR / f"{TASK_ID}.e1.html").as_uri()
    browser.get(link.get_attribute("href") or "")
    assert browser.find_element(By.ID, "sample-title").text.startswith(f"{TASK_ID} · epoch 1")
    # In time order: the first call, the SQL it asked for, the calls after, the answer.
    kinds = [e.get_attribute("data-kind") for e in browser.find_elements(By.CSS_SELECTOR, "section.event")]
    assert kinds == ["model_call", "query", "model_call", "model_call", "answer"]
    first = browser.find_element(By.ID, "call-1")
    roles = [r.text for r in first.find_elements(By.CSS_SELECTOR, ".msg > .role")]
    assert roles == ["SYSTEM", "USER", "ASSISTANT"]
    assert "1201 in (1000 cached) / 41 out tokens" in first.find_element(By.CSS_SELECTOR, ".tokens").text
    # The model's script tag is text on the page, and never ran.
    reply = first.find_element(By.CSS_SELECTOR, ".msg.reply")
    assert HOSTILE in reply.text
    assert browser.execute_script("return window.pwned === undefined") is True
    # The Bash call's SQL is laid out one clause a line, as it ran: its tokens as the agent wrote them.
    assert first.find_element(By.CSS_SELECTOR, ".tool-call pre.sql").text.splitlines() == [
        "SELECT status, count(*) AS n",
        "FROM okta_users",
        "GROUP BY status",
        "ORDER BY status",
    ]
    # The long system prompt is folded until opened.
    system = first.find_element(By.CSS_SELECTOR, ".msg.system details.fold")
    assert system.get_attribute("open") is None
    system.find_element(By.TAG_NAME, "summary").click()
    assert system.get_attribute("open") is not None and "ispm-sql" in system.text
    # The second call shows the tool's result, not the history again.
    second = browser.find_element(By.ID, "call-2")
    assert [r.text for r in second.find_elements(By.CSS_SELECTOR, ".msg > .role")] == ["USER", "ASSISTANT"]
    assert "ACTIVE" in second.find_element(By.CSS_SELECTOR, ".tool-result").text
    votes = browser.find_elements(By.CSS_SELECTOR, "#votes + table tr[data-dimension]")
    assert len(votes) == len([e for e in timeline.events if isinstance(e, VoteStep)])
    browser.find_element(By.ID, "call-1").location_once_scrolled_into_view  # noqa: B018
    shot = screenshot(browser, tmp_path / "sample.png")
    assert struct.unpack(">II", shot.read_bytes()[16:24])[0] >= 1000  # the page's full width
    shutil.copyfile(shot, SHOT_FOR_PEOPLE)


def test_the_report_links_the_sample_page_and_inlines_none_of_it(run_dir: Path) -> None:
    report = (run_dir / REPORT_NAME).read_text(encoding="utf-8")
    assert f'href="{SAMPLES_DIR}/{TASK_ID}.e1.html"' in report
    page = (run_dir / SAMPLES_DIR / f"{TASK_ID}.e1.html").read_text(encoding="utf-8")
    assert "ACTIVE           | 1224" in page and "ACTIVE           | 1224" not in report
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page and "<script>window.pwned" not in page


def test_the_atif_export_validates_against_the_atif_package(run_dir: Path, tmp_path: Path) -> None:
    (path,) = write_atif(run_dir, tmp_path / "atif", TASKS)
    doc = atif.Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
    assert doc.schema_version == "ATIF-v1.8"
    agent = [s for s in doc.steps if s.source == "agent"]
    assert len(agent) == 3 and agent[0].message == HOSTILE
    assert agent[0].tool_calls is not None and agent[0].tool_calls[0].function_name == "Bash"
    assert agent[0].observation is not None and "ACTIVE" in str(agent[0].observation.results[0].content)
    assert agent[0].extra is not None and agent[0].extra["queries"][0]["sql"] == SQL
    assert agent[0].metrics is not None and (agent[0].metrics.prompt_tokens, agent[0].metrics.cached_tokens) == (
        1201,
        1000,
    )
    assert doc.final_metrics is not None and doc.final_metrics.total_prompt_tokens == 1201 + 1302 + 1403


def test_the_inspect_export_loads_in_inspect(run_dir: Path, tmp_path: Path) -> None:
    log = read_eval_log(str(write_inspect(run_dir, tmp_path / "inspect", TASKS)))
    assert log.status == "success" and log.samples is not None
    (sample,) = log.samples
    roles = [m.role for m in sample.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert sample.messages[2].text == HOSTILE
    assert sample.model_usage["anthropic/claude-scripted-1"].output_tokens == 41 + 52 + 13
    assert sample.scores is not None and sample.scores["ispm_scorer"].value["answer_correctness"] == 0.0  # type: ignore[index]
