"""The commands over a run's record: ``ispm audit``, ``report``, ``leaderboard`` and ``bundle``."""

from __future__ import annotations

from pathlib import Path

import click

from runner import log
from runner.cli.output import json_option, print_json


@click.command("audit")
@click.argument("target", type=click.Path(exists=True, path_type=Path))
@json_option("Print the audit report as JSON.")
def audit_command(target: Path, as_json: bool) -> None:
    """Recompute every number of a run folder or bundle from its raw journal; exit 1 naming every difference.

    Example: ispm audit runs/<run-id>
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.record.audit import audit

    report = audit(target)
    log.get(__name__).info("run.audited", source=str(target), ok=report.ok, problems=report.problems)
    if as_json:
        print_json(report)
    else:
        for note in report.notes:
            click.echo(f"note: {note}")
        checked = ", ".join(f"{name} {count}" for name, count in sorted(report.checks.items()))
        if report.ok:
            click.echo(f"ok: run {report.run_id} recomputes exactly ({checked})")
        else:
            for problem in report.problems:
                click.echo(f"  - {problem}", err=True)
            click.echo(f"FAILED: {len(report.problems)} problem(s) in {target}", err=True)
    if not report.ok:
        raise click.exceptions.Exit(1)


@click.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page (default: report.html beside the run's record.json).",
)
def report_command(run_dir: Path, out: Path | None) -> None:
    """Write a run's report: one self-contained HTML page (summary with CIs, charts, every task and vote).

    Example: ispm report runs/<run-id> --out /tmp/report.html
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.trace.sample_page import write_report_and_pages

    path = write_report_and_pages(run_dir, out=out)
    log.get(__name__).info("run.reported", run_dir=str(run_dir), report=str(path))
    click.echo(str(path))


@click.command("leaderboard")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("leaderboard.html"),
    show_default=True,
    help="Where to write the page.",
)
def leaderboard_command(run_dirs: tuple[Path, ...], out: Path) -> None:
    """Rank runs on one self-contained HTML page; runs without a score and calibrations are listed, unranked.

    RUN_DIRS are run folders (or their record.json files).

    Example: ispm leaderboard runs/* --out leaderboard.html
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.record.leaderboard import write_leaderboard

    path, rows = write_leaderboard(list(run_dirs), out)
    ranked = sum(r.rank is not None for r in rows)
    log.get(__name__).info("runs.leaderboard", runs=len(rows), ranked=ranked, out=str(path))
    click.echo(f"{path}: {len(rows)} runs, {ranked} ranked")


@click.command("bundle")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the archive (default: <run-id>.tar.gz beside the run folder).",
)
def bundle_command(run_dir: Path, out: Path | None) -> None:
    """Write a run folder as one deterministic tar.gz with a sha256 for every file in MANIFEST.json.

    Example: ispm bundle runs/<run-id> -o submission.tar.gz
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.record.bundle import bundle, default_bundle_path

    path = bundle(run_dir, out or default_bundle_path(run_dir))
    log.get(__name__).info("run.bundled", run_dir=str(run_dir), bundle=str(path))
    click.echo(str(path))
