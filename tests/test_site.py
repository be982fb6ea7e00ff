"""The site's pages as pure functions of the project's own definitions: the contract, the task filters, one task,
the dataset, and what bad input gets (an empty result that says why, a 404, escaped echoes, bounded search).

The HTML is read back with the standard library's parser, so each check looks at what a browser would show.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_runs import MIXED_PLAN, MIXED_TASKS, mixed

from runner.cli import main
from runner.contract import CLAUSES, RECORD_PARTS
from runner.errors import WorldError
from runner.grading.grades import DIMENSIONS
from runner.grading.rubric import load_rubrics
from runner.record.build import load_record
from runner.record.model import RunRecord
from runner.run.spec import V1_CONCURRENCY, V1_EPOCHS, V1_RUN_LIMIT_S, V1_SAMPLE_LIMIT_S
from runner.site import render
from runner.site.build import published_from_folders
from runner.site.errors import PageNotFound
from runner.site.filters import MAX_QUERY_CHARS
from runner.site.links import Links
from runner.site.model import SiteSources
from runner.site.results import task_results
from runner.site.sources import FIRST_ROWS, load_sources

__all__ = ["mixed"]  # a fixture, imported for pytest
SERVER = Links("server")
SCRIPT = "<script>window.pwned=1</script>"


@pytest.fixture(scope="module")
def sources() -> SiteSources:
    return load_sources()


class Page(HTMLParser):
    """What a page shows: its text, the ids of its visible task rows, its links and its element ids."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.text: list[str] = []
        self.rows: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self._hidden_depth = 0
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag == "tr" and "task-row" in (values.get("class") or "") and "hidden" not in values:
            self.rows.append((values.get("id") or "").removeprefix("row-"))
        if tag == "a" and values.get("href"):
            self.links.append(values["href"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def test_the_contract_page_states_the_six_clauses_dimensions_and_record_parts(sources: SiteSources) -> None:
    page = Page(render.contract_page(sources, SERVER))
    rubrics = load_rubrics()
    assert [c.key for c in CLAUSES] == ["world", "surface", "response", "repetition", "consensus", "limits"]
    for clause in CLAUSES:
        assert f"clause-{clause.key}" in page.ids and " ".join(clause.text.split()) in page.words
    for dimension in DIMENSIONS:
        question = rubrics.rubrics[dimension].text.split("\n\n")[1]
        assert f"dimension-{dimension}" in page.ids and " ".join(question.split()) in page.words
    assert "structural-coverage" in page.ids
    for part in RECORD_PARTS:
        assert part.title in page.words
    for target in ("/tasks", "/dataset", "/leaderboard", "/scoring", "/run-locally", "/submit"):
        assert target in page.links


def test_the_contract_clauses_say_what_the_official_lock_enforces() -> None:
    repetition = next(c.text for c in CLAUSES if c.key == "repetition")
    limits = next(c.text for c in CLAUSES if c.key == "limits")
    words = {2: "two", 5: "five"}
    assert f"{words[V1_EPOCHS]} epochs" in repetition
    assert f"{words[V1_CONCURRENCY]} concurrent samples" in limits
    assert f"{int(V1_SAMPLE_LIMIT_S // 60)} minutes per sample" in limits
    assert f"{int(V1_RUN_LIMIT_S // 3600)} hours for the complete run" in limits


def test_every_record_part_names_fields_the_run_record_has() -> None:
    for part in RECORD_PARTS:
        for dotted in part.fields:
            model: type = RunRecord
            for name in dotted.split("."):
                assert name in model.model_fields, f"{part.title}: {dotted}"
                annotation = model.model_fields[name].annotation
                inner = [a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields")]
                model = inner[0] if inner else annotation  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        ({"vendor": "okta"}, lambda t: "okta" in t.vendors),
        ({"vendor": "okta", "kind": "verdict"}, lambda t: "okta" in t.vendors and t.kind == "verdict"),
        ({"category": "offboarding", "hops": "2"}, lambda t: t.category == "offboarding" and t.hops == 2),
        ({"difficulty": "expert"}, lambda t: t.difficulty == "expert"),
        ({"trap": "pim_eligible"}, lambda t: "pim_eligible" in t.trap_families),
        ({"trap": "none"}, lambda t: not t.traps),
        ({"q": "LUMEN okta"}, lambda t: all(w in (t.id + t.title + t.prompt).lower() for w in ("lumen", "okta"))),
    ],
)
def test_a_filter_keeps_exactly_the_tasks_it_names(sources: SiteSources, params: dict[str, str], keep: object) -> None:
    expected = [t.id for t in sources.tasks if keep(t)]  # type: ignore[operator]
    assert 0 < len(expected) < len(sources.tasks)
    page = Page(render.tasks_page(sources, SERVER, {}, params))
    assert page.rows == expected
    assert f"{len(expected)} of {len(sources.tasks)} tasks shown" in page.words


def test_the_unfiltered_list_has_all_127_tasks(sources: SiteSources) -> None:
    page = Page(render.tasks_page(sources, SERVER, {}, {}))
    assert page.rows == [t.id for t in sources.tasks] and len(page.rows) == 127


def test_a_value_no_task_has_is_an_empty_result_that_says_so(sources: SiteSources) -> None:
    page = Page(render.tasks_page(sources, SERVER, {}, {"vendor": "salesforce"}))
    assert page.rows == []
    assert "No task matches these filters." in page.words
    assert "vendor: no task has the value 'salesforce'" in page.words


def test_filters_that_together_match_nothing_say_so(sources: SiteSources) -> None:
    page = Page(render.tasks_page(sources, SERVER, {}, {"q": "zebra-unicorn"}))
    assert page.rows == [] and "no task passes every filter together" in page.words


def test_a_search_longer_than_the_bound_is_refused_with_an_empty_result(sources: SiteSources) -> None:
    html = render.tasks_page(sources, SERVER, {}, {"q": "okta " * 1000})
    page = Page(html)
    assert page.rows == []
    assert f"q: longer than {MAX_QUERY_CHARS} characters" in page.words
    assert "okta " * (MAX_QUERY_CHARS // 5) in html and "okta " * (MAX_QUERY_CHARS // 5 + 1) not in html  # echo bounded


@pytest.mark.parametrize("axis", ["vendor", "kind", "category", "hops", "difficulty", "trap", "q"])
def test_a_script_tag_in_any_query_parameter_comes_back_escaped(sources: SiteSources, axis: str) -> None:
    html = render.tasks_page(sources, SERVER, {}, {axis: SCRIPT})
    assert SCRIPT not in html
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html


def test_a_task_page_shows_prompt_traps_truth_witnesses_and_history(sources: SiteSources) -> None:
    task = next(t for t in sources.tasks if t.id == "ispm-001")
    page = Page(render.task_page(sources, SERVER, {}, "ispm-001"))
    assert " ".join(task.prompt.split()) in page.words
    assert " ".join(task.witness_sql.split()) in page.words and " ".join(task.dual_sql.split()) in page.words
    for trap in task.traps:
        assert " ".join(trap.why.split()) in page.words
        assert " ".join(trap.naive_sql(task.witness_sql).split()) in page.words
    truth = sources.truth["ispm-001"]
    assert f"{truth.row_count} rows" in page.words
    assert all(str(e.identifier) in page.words for e in truth.entities if e.vendor == "hibob")
    assert " ".join(task.history[0].change.split()) in page.words
    assert "No published run has graded this task yet." in page.words


def test_a_task_page_shows_each_published_runs_grades(sources: SiteSources, mixed: Path) -> None:
    runs, _ = published_from_folders([mixed])
    results = task_results(runs)
    record = load_record(mixed)
    for task_id in MIXED_TASKS:
        html = render.task_page(sources, SERVER, results, task_id)
        grades = next(r.grades for r in record.scores.tasks if r.task_id == task_id)  # type: ignore[union-attr]
        cells = re.findall(r'<span class="g (\w+)">', html.split('id="task-results"')[1])
        assert cells == [grades.get(d, "none") for d in DIMENSIONS], task_id
    assert MIXED_PLAN["ispm-046"] == "nothing"
    assert 'class="g incorrect"' in render.task_page(sources, SERVER, results, "ispm-046")
    listing = Page(render.tasks_page(sources, SERVER, results, {"vendor": "okta"}, runs=1))
    assert "results of 1 published run" in listing.words


@pytest.mark.parametrize("task_id", ["ispm-999", "../etc/passwd", SCRIPT])
def test_an_unknown_task_is_not_found(sources: SiteSources, task_id: str) -> None:
    with pytest.raises(PageNotFound, match="There is no task"):
        render.task_page(sources, SERVER, {}, task_id)
    assert SCRIPT not in render.not_found_page(sources, SERVER, f"There is no task {SCRIPT!r}.")


def test_the_dataset_page_shows_the_manifest_every_table_and_the_docs(sources: SiteSources) -> None:
    page = Page(render.dataset_page(sources, SERVER))
    m = sources.manifest
    for value in (m.dataset, m.publish_date, m.snapshot.sha256, m.logical_digest):
        assert value in page.words
    assert len(sources.tables) == len(m.tables) == 67
    for table in sources.tables:
        assert f"/dataset/{table.name}" in page.links and f"table-{table.name}" in page.ids
    for download in sources.downloads:
        assert f"/dataset/files/{download.name}" in page.links and download.sha256 in page.words
    assert sources.docs[0].name == "overview.md" and len(sources.docs) == 9
    assert "How identities appear" in page.words


def test_a_table_page_shows_its_columns_and_first_rows(sources: SiteSources) -> None:
    table = next(t for t in sources.tables if t.name == "okta_users")
    page = Page(render.table_page(sources, SERVER, "okta_users"))
    assert all(c.name in page.words for c in table.columns)
    assert len(table.first_rows) == FIRST_ROWS and str(table.first_rows[0][0]) in page.words
    assert "/tasks/ispm-001" in page.links  # its witness reads okta_users
    with pytest.raises(PageNotFound, match="There is no table 'sqlite_master'"):
        render.table_page(sources, SERVER, "sqlite_master")


def test_static_links_are_relative_files_at_each_depth() -> None:
    top, below = Links("static"), Links("static", depth=1)
    assert top.page("contract") == "index.html" and below.page("tasks") == "../tasks.html"
    assert below.task("ispm-001") == "../tasks/ispm-001.html" and top.table("okta_users") == "dataset/okta_users.html"
    assert (
        SERVER.task("ispm-001") == "/tasks/ispm-001"
        and SERVER.download("manifest.json") == "/dataset/files/manifest.json"
    )


@pytest.mark.parametrize("what", ["task", "table"])
def test_a_404_repeats_at_most_80_characters_of_the_visitors_path(sources: SiteSources, what: str) -> None:
    with pytest.raises(PageNotFound) as caught:
        if what == "task":
            render.task_page(sources, SERVER, {}, "x" * 50_000)
        else:
            render.table_page(sources, SERVER, "x" * 50_000)
    assert "x" * 80 + "…" in str(caught.value) and "x" * 81 not in str(caught.value)


def test_site_build_prints_where_the_site_is_and_what_it_holds(tmp_path: Path) -> None:
    out = tmp_path / "public"
    result = CliRunner().invoke(main, ["site", "build", str(out)])
    assert result.exit_code == 0, result.output
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert result.output == f"{out / 'index.html'}: 201 pages, 0 published runs, {written} bytes\n"
    assert len(list(out.rglob("*.html"))) == 201


def test_site_build_refuses_a_run_folder_without_a_record(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    result = CliRunner().invoke(main, ["site", "build", str(tmp_path / "public"), "--run", str(empty)])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {empty / 'record.json'}: not a readable run record (")
    assert not (tmp_path / "public").exists()  # nothing half-built


@pytest.mark.parametrize("damage", ["docs/okta.md", "ispm-crossvendor-v1.sqlite"])
def test_a_world_that_is_not_the_pinned_one_is_refused_naming_the_file(world_copy: Path, damage: str) -> None:
    with (world_copy / damage).open("ab") as f:
        f.write(b"\n")
    with pytest.raises(WorldError, match=re.escape(str(world_copy / damage)) + ": not the"):
        load_sources(world_copy)


def test_the_contract_page_holds_each_rubric_the_judges_read(sources: SiteSources) -> None:
    page = Page(render.contract_page(sources, SERVER))
    for dimension, rubric in load_rubrics().rubrics.items():
        assert f"The rubric the judges read (version {rubric.version})" in page.words
        last_line = rubric.text.strip().splitlines()[-1]
        assert " ".join(re.sub(r"[*`]", "", last_line).split()) in page.words, dimension


def test_control_characters_in_a_search_are_spaces(sources: SiteSources) -> None:
    html = render.tasks_page(sources, SERVER, {}, {"q": "lumen\x00okta\u202e"})
    assert "\x00" not in html and "\u202e" not in html
    assert Page(html).rows == Page(render.tasks_page(sources, SERVER, {}, {"q": "lumen okta"})).rows != []
