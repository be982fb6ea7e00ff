"""The ``ispm analytics`` command: questions across runs, in SQL."""

from __future__ import annotations

from pathlib import Path

import click

from runner.cli.output import json_option, print_json_lines


@click.command("analytics")
@click.argument("run_dirs", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--query", "query_name", default="leaderboard", show_default=True, help="A named query; --list shows them."
)
@click.option("--sql", help="Your own SQL over the tables runs, dimension_scores, task_grades, samples.")
@click.option("--run-a", help="For --query diff: the first run id.")
@click.option("--run-b", help="For --query diff: the second run id.")
@click.option("--parquet", type=click.Path(file_okay=False, path_type=Path), help="Also export every table here.")
@click.option("--list", "list_queries", is_flag=True, help="List the named queries and exit.")
@json_option("Print rows as JSON objects, one per line.")
def analytics_command(
    run_dirs: tuple[Path, ...],
    query_name: str,
    sql: str | None,
    run_a: str | None,
    run_b: str | None,
    parquet: Path | None,
    list_queries: bool,
    as_json: bool,
) -> None:
    """Answer questions across runs in SQL (DuckDB): leaderboard, breakdowns, run-against-run diffs.

    RUN_DIRS are run folders (or record.json files); default: every folder under runs/.

    Example: ispm analytics runs/* --query diff --run-a RUN1 --run-b RUN2
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.record.model import RECORD_NAME
    from runner.record.store import QUERIES, AnalyticsError, export_parquet, load_summaries, open_store, run_query

    if list_queries:
        for name, text in QUERIES.items():
            click.echo(f"{name}: {' '.join(text.split())}")
        return
    folders = list(run_dirs) or sorted(p for p in Path("runs").glob("*") if (p / RECORD_NAME).is_file())
    if not folders:
        raise AnalyticsError("no run folders given and none under runs/")
    conn = open_store(load_summaries(folders))
    if parquet is not None:
        for path in export_parquet(conn, parquet):
            click.echo(f"wrote {path}", err=True)
    if sql is None and query_name not in QUERIES:
        raise AnalyticsError(f"unknown query {query_name!r}; known: {', '.join(QUERIES)}")
    params = {"run_a": run_a or "", "run_b": run_b or ""} if sql is None and query_name == "diff" else None
    columns, rows = run_query(conn, sql or QUERIES[query_name], params)
    if as_json:
        print_json_lines(dict(zip(columns, row, strict=True)) for row in rows)
        return
    click.echo("\t".join(columns))
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))
