"""``ispm site build``: the publisher's site as static files."""

from __future__ import annotations

from pathlib import Path

import click

from runner import log
from runner.cli.output import json_option, print_json


@click.group("site")
def site() -> None:
    """The publisher's site: the contract, the tasks, the dataset, the leaderboard and how a run becomes a score.

    Example: ispm site build public/
    """


@site.command("build")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--run",
    "run_dirs",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A published run's folder (or its record.json), shown on the leaderboard and the task pages (repeatable).",
)
@json_option("Print what was written as one JSON object.")
def build_command(out: Path, run_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Write the site as static files into OUT: relative links, filters in the browser, opens from the file system.

    Example: ispm site build public/ --run runs/2026-12-01T10-00-00Z-abc123
    """
    # Loaded when the command runs, not at ispm's start-up (the site's build imports most of the project).
    from runner.site.build import build_site, published_from_folders
    from runner.site.sources import load_sources

    runs, reports = published_from_folders(list(run_dirs))
    built = build_site(load_sources(), out, runs, reports)
    log.get(__name__).info("site.build", out=str(out), pages=built.pages, runs=built.runs, seconds=built.seconds)
    if as_json:
        print_json(built)
        return
    click.echo(f"{built.index}: {built.pages} pages, {built.runs} published runs, {built.bytes} bytes")
