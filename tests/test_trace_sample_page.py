"""The sample pages as HTML, without a browser: written beside the report, linked and never inlined, every model and
agent text inert, long content folded and bounded (the browser test is in test_trace_claude_code.py)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_runs import mixed
from trace_runs import AGENT_SAYS, KEY, REPLY, task_set, write_run

from runner.record.report import REPORT_NAME
from runner.sample_key import SampleKey
from runner.trace.sample_page import (
    MAX_SHOWN_CHARS,
    SAMPLES_DIR,
    page_name,
    sample_page_path,
    shown,
    write_report_and_pages,
)

__all__ = ["mixed"]  # a fixture, imported for pytest


class _Elements(HTMLParser):
    """Every start tag, and the text inside each ``<script>``."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.tags


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_run(tmp_path_factory.mktemp("pages") / "run")
    write_report_and_pages(folder, tasks=task_set())
    return folder


def _page(run: Path) -> str:
    return (run / SAMPLES_DIR / f"{KEY.label()}.html").read_text(encoding="utf-8")


def test_the_report_links_each_sample_to_its_own_page(run: Path) -> None:
    report = (run / REPORT_NAME).read_text(encoding="utf-8")
    links = [a.get("href") for tag, a in _tags(report) if tag == "a" and a.get("class") == "sample-link"]
    assert links == [f"{SAMPLES_DIR}/{KEY.label()}.html"]
    assert sample_page_path(run, f"{KEY.label()}.html") == run / SAMPLES_DIR / f"{KEY.label()}.html"


def test_model_and_agent_text_on_the_page_is_inert(run: Path) -> None:
    page = _page(run)
    tags = _tags(page)
    assert not [t for t, _ in tags if t in ("script", "img", "iframe")]
    assert not [a for _, a in tags if any(k.startswith("on") for k in a)]
    assert "Counting users &lt;script&gt;window.pwned = 1&lt;/script&gt;" in page and REPLY not in page
    assert "Nobody &lt;b&gt;left&lt;/b&gt; can sign in." in page
    assert AGENT_SAYS not in page and "&lt;/pre&gt;&lt;script&gt;window.pwned = 3" in page  # the agent's own trace
    # The page loads nothing from outside.
    assert not [a for _, a in tags if any((v or "").startswith(("http:", "https:", "//")) for v in a.values())]


def test_the_page_has_the_conversation_the_sql_log_and_the_votes_in_order(run: Path) -> None:
    kinds = [a.get("data-kind") for tag, a in _tags(_page(run)) if a.get("data-kind")]
    assert kinds == [
        "model_call", "query", "agent_reported", "agent_reported", "query", "model_call", "answer", "judge_call",
    ]  # fmt: skip
    rows = [a for tag, a in _tags(_page(run)) if tag == "tr" and a.get("data-dimension")]
    assert [(r["data-judge"], r["data-dimension"]) for r in rows] == [
        ("ref#1", "answer_correctness"), ("ref#1", "reasoning_utility"),
        ("ref#2", "answer_correctness"), ("ref#2", "reasoning_utility"),
    ]  # fmt: skip


def test_the_summary_page_does_not_grow_with_the_conversations(tmp_path: Path) -> None:
    short = write_run(tmp_path / "short")
    long = write_run(tmp_path / "long", result="row\n" * 50_000)
    sizes = [write_report_and_pages(r, tasks=task_set()).stat().st_size for r in (short, long)]
    assert sizes[0] == sizes[1]
    assert (long / SAMPLES_DIR / f"{KEY.label()}.html").stat().st_size > 100_000


def test_long_content_is_folded_and_past_the_bound_cut() -> None:
    assert not shown("a short reply").folded
    many_lines = shown("\n".join(str(i) for i in range(40)))
    assert many_lines.folded and many_lines.head == "0\n1\n2\n3\n4\n5"
    huge = shown("x" * (MAX_SHOWN_CHARS + 7))
    assert huge.folded and len(huge.text) == MAX_SHOWN_CHARS and huge.cut == 7


def test_a_long_tool_result_is_folded_on_the_page(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", result="row\n" * (MAX_SHOWN_CHARS // 2))
    write_report_and_pages(run, tasks=task_set())
    page = _page(run)
    assert '<details class="fold mono">' in page
    assert "more characters not shown (ispm trace --json has them)" in page


@pytest.mark.parametrize("task_id", ["../etc", "a/b", "", ".hidden", "x" * 200, "ispm 001"])
def test_a_task_id_unfit_for_a_file_name_gets_no_page(task_id: str) -> None:
    assert page_name(SampleKey(task_id=task_id, epoch=1)) is None


@pytest.mark.parametrize("name", ["../record.json", "report.html", "ispm-001.e1.html/..", "ispm-001.e1.htm"])
def test_only_sample_page_names_are_served(run: Path, name: str) -> None:
    assert sample_page_path(run, name) is None


def test_the_reports_failures_link_each_failed_sample_to_its_page(mixed: Path) -> None:
    report = (mixed / REPORT_NAME).read_text(encoding="utf-8")
    links = [a.get("href") for tag, a in _tags(report) if tag == "a" and a.get("class") == "failed-sample-link"]
    assert links == [f"{SAMPLES_DIR}/ispm-073.e1.html", f"{SAMPLES_DIR}/ispm-073.e2.html"]
    assert all((mixed / link).is_file() for link in links if link)


def test_every_line_of_the_page_says_who_wrote_it(run: Path) -> None:
    from markupsafe import escape

    from runner.trace.text import PROVENANCE

    page = _page(run)
    assert f'<dd id="provenance">{escape(PROVENANCE)}</dd>' in page
    assert page.count("<b>SQL logged by the SQL tool inside the sandbox</b>") == 2
    assert page.count("host query log") == 0  # the host never saw the SQL run: the tool in the sandbox logged it
    assert '<span class="replay replay-same">host replay: same rows</span>' in page
    assert (
        '<span class="replay replay-not_replayed">host replay: not replayed (the sample&#39;s analysis budget was '
        "spent)</span>"
    ) in page
    assert page.count('<b>model call 1</b> <span class="small muted">captured by the host</span>') == 1
    assert page.count("<b>reported by the agent</b>") == 2
