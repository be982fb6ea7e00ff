"""The run report and the leaderboard, as HTML: numbers equal the record's, every task and vote is there, agent
text is inert, nothing is fetched from outside, and "How a run becomes a score" is embedded and linked.

The records come from real runs (``report_runs``): two calibrations in Docker and three in-process runs, each
written by ``start_run`` from its journal. The pages are parsed with the standard library's HTML parser.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from report_runs import (
    HOSTILE_ERROR,
    HOSTILE_SQL,
    MIXED_PLAN,
    MIXED_TASKS,
    ScriptedBackend,
    all_gold,
    docker_null,
    docker_replay,
    mixed,
    scripted_spec,
    timed_out,
)

from runner.cli import main
from runner.grading.grades import DIMENSIONS
from runner.paths import scoring_doc, tasks_dir
from runner.pipeline import start_run
from runner.record.build import load_record
from runner.record.cost import run_cost
from runner.record.leaderboard import board_rows, render_leaderboard
from runner.record.model import FAILURE_KINDS, RunRecord
from runner.record.report import (
    REPORT_NAME,
    Bar,
    bar_chart,
    highest_pass_k,
    render_markdown,
    render_report,
)
from runner.tasks.load import load_tasks

__all__ = ["all_gold", "docker_null", "docker_replay", "mixed", "timed_out"]  # fixtures, imported for pytest

TASKS = load_tasks(tasks_dir())
SCORING = scoring_doc().read_text(encoding="utf-8")
DOCKER = pytest.mark.docker
RUNS = [
    pytest.param("docker_replay", marks=DOCKER),
    pytest.param("docker_null", marks=DOCKER),
    "mixed",
    "all_gold",
    "timed_out",
]


# -- a small DOM over html.parser -----------------------------------------------------------------------------
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str | None = None, **attrs: str) -> list[Node]:
        """Every descendant with this tag (any when None) whose attributes hold these values (class: one of)."""
        found = []
        for c in self.children:
            if isinstance(c, str):
                continue
            if (tag is None or c.tag == tag) and all(_has(c, k, v) for k, v in attrs.items()):
                found.append(c)
            found += c.all(tag, **attrs)
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, f"expected one <{tag} {attrs}>, found {len(found)}"
        return found[0]


def _has(node: Node, key: str, value: str) -> bool:
    key = key.rstrip("_").replace("_", "-")
    if key == "class":
        return value in node.attrs.get("class", "").split()
    return node.attrs.get(key) == value


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, text: str) -> None:
        self.stack[-1].children.append(text)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def squash(text: str) -> str:
    return " ".join(text.split())


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


@pytest.fixture()
def run(request: pytest.FixtureRequest) -> tuple[Path, RunRecord, Node]:
    """(run folder, its record, its report page as written by the run itself)."""
    run_dir: Path = request.getfixturevalue(request.param)
    return run_dir, load_record(run_dir), parse((run_dir / REPORT_NAME).read_text(encoding="utf-8"))


def _planned(record: RunRecord) -> list[str]:
    return sorted(record.spec.tasks) if record.spec.tasks is not None else sorted(t.id for t in TASKS)


# -- the run hook ---------------------------------------------------------------------------------------------


def test_a_run_writes_its_report_beside_the_record_and_says_where(tmp_path: Path) -> None:
    result = start_run(
        scripted_spec(MIXED_TASKS[:2], epochs=1), tmp_path / "run", backend=ScriptedBackend({}), images={}
    )
    assert result.report_path == tmp_path / "run" / REPORT_NAME
    assert result.report_path.is_file()
    lines = result.summary_lines()
    assert lines.index(f"record: {result.record_path}") + 1 == lines.index(f"report: {result.report_path}")


@pytest.mark.parametrize("run", RUNS, indirect=True)
def test_the_written_report_is_the_render_of_its_record(run: tuple[Path, RunRecord, Node]) -> None:
    run_dir, record, _ = run
    # Each sample's own page is linked, never inlined (runner/record/sample_page.py).
    pages = {s.key: f"samples/{s.key.label()}.html" for s in record.samples}
    assert (run_dir / REPORT_NAME).read_text(encoding="utf-8") == render_report(record, TASKS, SCORING, pages)


# -- the summary ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", RUNS, indirect=True)
def test_summary_numbers_match_the_record(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    assert page.one(id="run-status").text() == record.status
    assert squash(page.one(id="samples-graded").text()) == f"{record.samples_graded} / {record.samples_planned} graded"
    failures = {
        squash(tr.all("td")[0].text()): int(tr.all("td")[1].text()) for tr in page.one(id="failure-counts").all("tr")
    }
    assert failures == {k: record.failures.get(k, 0) for k in FAILURE_KINDS}
    tokens = page.one(id="tokens")
    judges = {
        squash(tr.all("td")[0].text()): [squash(td.text()) for td in tr.all("td")[1:]]
        for tr in tokens.all("tr", class_="judge")
    }
    cost = run_cost(record)
    judge_cost = {j.party: j.cost.text() for j in cost.judges}
    assert judges == {
        f"judge {j}": [str(c.requests), str(c.input_tokens), "–", str(c.output_tokens), "–", judge_cost[j]]
        for j, c in record.judge_tokens.items()
    }
    agent = squash(tokens.one("tr", class_="agent").text())
    if record.agent_tokens is None:
        assert "no gateway" in agent
    else:
        count = record.agent_tokens
        assert agent == (
            f"agent {count.requests} {count.input_tokens} {count.cached_tokens} {count.output_tokens} "
            f"{count.reasoning_tokens} {cost.agent_cost.text()}"
        )
    assert squash(tokens.one(id="run-cost").text()) == f"run{cost.total.text()}"
    scores = record.scores
    if scores is None:
        assert page.all(class_="mean") == []
        return
    assert scores.reliability is not None
    rows = {
        tr.attrs["data-summary-dimension"]: [squash(td.text()) for td in tr.all("td")]
        for tr in page.all("tr")
        if "data-summary-dimension" in tr.attrs
    }
    expected = {}
    for d, s in scores.dimensions.items():
        inter = scores.reliability.inter_judge[d]
        expected[d] = [
            d,
            _num(s.mean),
            _ci(scores.reliability.ci[d]),
            str(s.graded),
            str(s.abstained),
            _num(scores.reliability.agreement[d]),
            _num(inter.alpha),
            _num(inter.kappa),
            str(inter.pairs),
            _num(record.abstention_rates.get(d)),
        ]
    assert rows == expected
    strict = [squash(td.text()) for td in page.one(id="strict-success").all("td")]
    assert strict[1:3] == [_num(scores.strict_success_rate), _ci(scores.reliability.strict_success_ci)]
    passes = page.one(id="pass-k").all("td")
    assert [squash(td.text()) for td in passes] == [_num(v) for _, v in sorted(scores.pass_hat_k.items())]


@pytest.mark.parametrize("run", RUNS, indirect=True)
def test_every_planned_task_appears_once_with_its_labels_and_consensus(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    tasks = page.all("details", class_="task")
    assert [t.attrs["id"] for t in tasks] == [f"task-{i}" for i in _planned(record)]
    by_id = {t.id: t for t in TASKS}
    results = {r.task_id: r for r in record.scores.tasks} if record.scores else {}
    for node in tasks:
        task = by_id[node.attrs["id"].removeprefix("task-")]
        assert node.attrs["data-vendor"].split() == list(task.vendors)
        assert (node.attrs["data-kind"], node.attrs["data-category"], node.attrs["data-hops"]) == (
            task.kind,
            task.category,
            str(task.hops),
        )
        chips = [g.attrs["class"].split()[1] for g in node.one("summary").all(class_="g")][: len(DIMENSIONS)]
        grades = results[task.id].grades if task.id in results else {}
        assert chips == [grades.get(d, "none") for d in DIMENSIONS]


@pytest.mark.parametrize("run", RUNS, indirect=True)
def test_every_vote_is_in_its_epoch_grid_with_its_rationale(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    judges = record.spec.judges
    assert record.samples, "the run graded nothing"
    for sample in record.samples:
        epoch = page.one("details", id=f"task-{sample.task_id}").one(
            "div", class_="epoch", data_epoch=str(sample.epoch)
        )
        grid = {
            tr.attrs["data-dimension"]: tr.all("td")
            for tr in epoch.one("table", class_="votes").all("tr")
            if "data-dimension" in tr.attrs
        }
        votes = {(v.judge, v.dimension): v for v in sample.votes}
        assert set(grid) == {d for _, d in votes}
        result = next((r for r in record.scores.tasks if r.task_id == sample.task_id), None) if record.scores else None
        for d, cells in grid.items():
            for i, judge in enumerate(judges):
                vote = votes[(judge, d)]
                assert cells[1 + 2 * i].one(class_="g").text() == vote.grade
                assert cells[2 + 2 * i].text() == vote.rationale
            consensus = cells[-1].one(class_="g").attrs["class"].split()[1]
            assert consensus == (result.epochs[d][sample.epoch] if result else "none")
        if sample.error:
            assert sample.error in epoch.one("p", class_="failure").text()


@pytest.mark.parametrize("run", [pytest.param("docker_replay", marks=DOCKER), "mixed"], indirect=True)
def test_declared_sql_and_coverage_are_shown(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    measured = 0
    for sample in record.samples:
        epoch = page.one("details", id=f"task-{sample.task_id}").one(
            "div", class_="epoch", data_epoch=str(sample.epoch)
        )
        assert [pre.text() for pre in epoch.all("pre", class_="sql")] == sample.queries_declared
        coverage = squash(epoch.one("div", class_="coverage").text())
        if sample.coverage is not None:
            measured += 1
            assert f"table recall {_num(sample.coverage.table_recall)}" in coverage
            assert f"join recall {_num(sample.coverage.join_recall)}" in coverage
            for table in sample.coverage.witness_tables:
                assert table in coverage
    assert measured > 0, "no sample had coverage to show"


@pytest.mark.parametrize("run", ["mixed"], indirect=True)
def test_every_failed_sample_is_listed_with_its_reason(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    failed = sorted((s.task_id, s.epoch, s.status, s.error or "") for s in record.samples if s.status != "ok")
    assert len(failed) == 2 * sum(p == "timeout" for p in MIXED_PLAN.values())
    rows = [[squash(td.text()) for td in tr.all("td")] for tr in page.one(id="failure-list").all("tr")[1:]]
    assert rows == [[t, str(e), s, squash(err)] for t, e, s, err in failed]


@pytest.mark.parametrize("run", ["all_gold"], indirect=True)
def test_a_run_without_failures_says_so(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    assert sum(record.failures.values()) == 0
    assert page.one(id="no-failures")


# -- no score, calibration ------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["timed_out"], indirect=True)
def test_a_timed_out_run_shows_no_score(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, page = run
    assert record.status == "timed_out" and record.scores is None
    assert "No score" in page.one(id="no-score").text()
    assert page.one(id="scores-withheld")
    assert page.all("svg") == [] and page.all(class_="mean") == [] and page.all(id="pass-k") == []


@pytest.mark.parametrize(
    ("run", "banner"),
    [
        pytest.param("docker_replay", "replay agent", marks=DOCKER),
        pytest.param("docker_null", "null agent", marks=DOCKER),
        ("mixed", None),
        ("timed_out", None),
    ],
    indirect=["run"],
)
def test_calibration_runs_say_loudly_they_are_not_a_model_score(
    run: tuple[Path, RunRecord, Node], banner: str | None
) -> None:
    _, record, page = run
    found = page.all(id="calibration-banner")
    if banner is None:
        assert found == [] and record.calibration is None
        assert page.one(id="run-class").text() == "non-official"
    else:
        assert banner in found[0].text() and "NOT a model score" in found[0].text()
        assert page.one(id="run-class").text() == "calibration"


# -- hostile text, external URLs, the scoring page ------------------------------------------------------------

_OUR_SCRIPTS = 1  # the page's own inline script


@pytest.mark.parametrize("run", ["mixed"], indirect=True)
def test_agent_sql_and_errors_are_inert(run: tuple[Path, RunRecord, Node]) -> None:
    run_dir, record, page = run
    html = (run_dir / REPORT_NAME).read_text(encoding="utf-8")
    assert any(HOSTILE_SQL in s.queries_declared for s in record.samples)
    assert any(s.error == HOSTILE_ERROR for s in record.samples)
    assert html.count("<script") == _OUR_SCRIPTS
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;/pre&gt;&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert HOSTILE_SQL in [pre.text() for pre in page.all("pre", class_="sql")]


@pytest.mark.parametrize("run", ["all_gold"], indirect=True)
def test_a_script_in_a_rationale_comes_out_inert(run: tuple[Path, RunRecord, Node]) -> None:
    _, record, _ = run
    hostile = '"><script>alert("rationale")</script>'
    sample = record.samples[0]
    votes = [v.model_copy(update={"rationale": hostile, "judge": v.judge}) for v in sample.votes]
    tampered = record.model_copy(
        update={"samples": [sample.model_copy(update={"votes": votes, "error": hostile}), *record.samples[1:]]}
    )
    html = render_report(tampered, TASKS, SCORING)
    assert html.count("<script") == _OUR_SCRIPTS
    assert "alert(&#34;rationale&#34;)" in html
    rationales = [td.text() for td in parse(html).all("td", class_="rationale")]
    assert rationales.count(hostile) == len(votes)


def _pages(request: pytest.FixtureRequest, names: list[str]) -> list[str]:
    return [(request.getfixturevalue(n) / REPORT_NAME).read_text(encoding="utf-8") for n in names]


_EXTERNAL = re.compile(
    r"(?i)(https?:|ftp:|file:|data:|//[a-z0-9-]+\.[a-z]|\bsrc\s*=|url\(|@import|<link|<iframe|<object)"
)


@pytest.mark.parametrize("name", ["mixed", "all_gold", "timed_out", pytest.param("docker_replay", marks=DOCKER)])
def test_no_page_refers_to_anything_outside_itself(request: pytest.FixtureRequest, name: str) -> None:
    report = _pages(request, [name])[0]
    records = [load_record(request.getfixturevalue(n)) for n in ("mixed", "all_gold", "timed_out")]
    board = render_leaderboard(board_rows([(r, None) for r in records]), SCORING)
    for html in (report, board):
        # The one hostile <img src=...> an agent wrote is escaped text, so look only at markup and scripts.
        markup = re.sub(r"&lt;.*?&gt;", " ", html)
        assert _EXTERNAL.findall(markup) == []


def test_the_checker_does_see_an_external_url() -> None:
    assert _EXTERNAL.findall('<img src="x.png"><a href="https://cdn.example/x.js">') != []


@pytest.mark.parametrize("name", ["mixed", "timed_out"])
def test_how_a_run_becomes_a_score_is_embedded_and_linked(request: pytest.FixtureRequest, name: str) -> None:
    records = [load_record(request.getfixturevalue(name))]
    for html in (_pages(request, [name])[0], render_leaderboard(board_rows([(r, None) for r in records]), SCORING)):
        page = parse(html)
        link = page.one("a", id="scoring-link")
        assert link.attrs["href"] == "#scoring" and link.text() == "How a run becomes a score"
        section = page.one("section", id="scoring")
        assert [h.text() for h in section.all("h1")] == ["How a run becomes a score"]
        headings = [squash(h.text()) for h in section.all("h2")]
        assert headings == [
            squash(line.removeprefix("## ").replace("`", "")) for line in SCORING.splitlines() if line.startswith("## ")
        ]
        assert "pass^k = mean over tasks of C(c, k) / C(n, k)" in section.text()


def test_raw_html_in_markdown_is_escaped() -> None:
    html = str(render_markdown("# T\n\n<script>alert(1)</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"))
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<table>" in html and "<h1>T</h1>" in html


def test_the_wheel_carries_the_scoring_page_where_paths_finds_it() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    included = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert included["docs/scoring.md"] == "runner/_bundle/docs/scoring.md"
    assert scoring_doc().is_file() and scoring_doc().read_text(encoding="utf-8").startswith(
        "# How a run becomes a score"
    )


# -- pure helpers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bars", "widths", "whiskers", "texts"),
    [
        ([Bar("a", 1.0)], [380.0], [None], ["1.000"]),
        ([Bar("a", 0.5, 0.25, 0.75)], [190.0], [(250 + 95.0, 250 + 285.0)], ["0.500 [0.250, 0.750]"]),
        (
            [Bar("a", None), Bar("b", 0.0, 0.0, 0.0, note="(3 tasks)")],
            [0.0, 0.0],
            [None, (250.0, 250.0)],
            ["n/a", "0.000 [0.000, 0.000]  (3 tasks)"],
        ),
    ],
)
def test_bar_chart_geometry(
    bars: list[Bar], widths: list[float], whiskers: list[tuple[float, float] | None], texts: list[str]
) -> None:
    chart = bar_chart("t", bars)
    assert [b.width for b in chart.bars] == widths
    assert [b.whisker for b in chart.bars] == whiskers
    assert [b.text for b in chart.bars] == texts
    assert [b.y for b in chart.bars] == [chart.top + i * chart.row_height for i in range(len(bars))]
    assert chart.ticks[0][0] == chart.plot_left and chart.ticks[-1][0] == chart.plot_left + chart.plot_width


@pytest.mark.parametrize(
    ("pass_hat_k", "expected"),
    [
        ({1: 0.4, 2: 0.1, 3: 0.0, 4: 0.0, 5: 0.0}, (5, 0.0)),
        ({1: 1.0, 2: 1.0, 3: None, 4: None, 5: None}, (2, 1.0)),
        ({1: None}, None),
        ({}, None),
    ],
)
def test_highest_pass_k(pass_hat_k: dict[int, float | None], expected: tuple[int, float] | None) -> None:
    assert highest_pass_k(pass_hat_k) == expected


# -- the leaderboard ------------------------------------------------------------------------------------------


@DOCKER
def test_the_board_ranks_scored_model_runs_and_lists_the_rest_with_a_reason(
    mixed: Path, all_gold: Path, timed_out: Path, docker_replay: Path
) -> None:
    records = {
        name: load_record(d)
        for name, d in [("mixed", mixed), ("gold", all_gold), ("timed_out", timed_out), ("replay", docker_replay)]
    }
    twin = records["gold"].model_copy(update={"run_id": "zz-twin-of-gold"})
    rows = board_rows([(r, None) for r in [*records.values(), twin]])
    ranks = {r.record.run_id: r.rank for r in rows}
    gold, mixed_record = records["gold"], records["mixed"]
    assert gold.scores is not None and mixed_record.scores is not None
    assert gold.scores.dimensions["answer_correctness"].mean == 1.0
    mixed_mean = mixed_record.scores.dimensions["answer_correctness"].mean
    assert mixed_mean is not None and mixed_mean < 1.0
    assert ranks == {
        gold.run_id: 1,
        twin.run_id: 1,
        mixed_record.run_id: 3,
        records["timed_out"].run_id: None,
        records["replay"].run_id: None,
    }
    reasons = {r.record.run_id: r.unranked_reason for r in rows}
    assert "Timed out" in (reasons[records["timed_out"].run_id] or "")
    assert "calibration" in (reasons[records["replay"].run_id] or "")
    assert [r.rank for r in rows][:3] == [1, 1, 3]
    mixed_row = next(r for r in rows if r.record.run_id == mixed_record.run_id)
    assert mixed_row.pass_k == highest_pass_k(mixed_record.scores.pass_hat_k) and mixed_row.pass_k is not None
    assert mixed_row.pass_k[0] == mixed_record.spec.epochs
    page = parse(render_leaderboard(rows, SCORING))
    shown = {tr.attrs["data-run"]: squash(tr.one("td", class_="rank").text()) for tr in page.all("tr", class_="run")}
    assert shown == {run_id: str(rank) if rank else "–" for run_id, rank in ranks.items()}


# -- the commands ---------------------------------------------------------------------------------------------


def test_ispm_report_writes_the_page_and_prints_its_path(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "page.html"
    result = CliRunner().invoke(main, ["report", str(mixed), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out)
    assert out.read_text(encoding="utf-8") == (mixed / REPORT_NAME).read_text(encoding="utf-8")


def test_ispm_report_names_a_missing_record(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 1
    assert "record.json" in result.output and str(tmp_path) in result.output


def test_ispm_leaderboard_writes_the_board_in_the_current_folder(
    mixed: Path, timed_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["leaderboard", str(mixed), str(timed_out / "record.json")])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "leaderboard.html: 2 runs, 1 ranked"
    page = parse((tmp_path / "leaderboard.html").read_text(encoding="utf-8"))
    links = [unquote(a.attrs["href"]) for a in page.one("table", id="leaderboard").all("a")]
    assert len(links) == 2 and all(Path(tmp_path, link).resolve().name == REPORT_NAME for link in links)
    assert all(Path(tmp_path, link).resolve().is_file() for link in links)


def test_ispm_leaderboard_names_a_folder_without_a_record(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["leaderboard", str(tmp_path), "--out", str(tmp_path / "b.html")])
    assert result.exit_code == 1
    assert str(tmp_path) in result.output and not (tmp_path / "b.html").exists()
