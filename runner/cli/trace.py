"""The commands that read a run's samples: ``ispm trace`` (one sample's timeline) and ``ispm export``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runner import log
from runner.cli.output import print_json


@click.command("trace")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--task", "task_id", required=True, help="The task whose sample to show, e.g. ispm-001.")
@click.option("--epoch", type=click.IntRange(min=1), help="The epoch (default: the task's first epoch in the run).")
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON (the default when piped).")
@click.option("--text", "as_text", is_flag=True, help="Print readable text even when piped.")
def trace_command(run_dir: Path, task_id: str, epoch: int | None, as_json: bool, as_text: bool) -> None:
    """Print one sample's timeline: model calls, SQL, the agent's own trace, the answer and the votes, in time order,
    then what the sample cost (dollars derived from its tokens).

    Readable text on a terminal; JSON with --json or when the output is piped.

    Example: ispm trace runs/<run-id> --task ispm-001 --epoch 2
    """
    # Imported when run, as the other nouns do: `ispm --help` loads no stage.
    from runner.trace.text import cost_lines, render_text
    from runner.trace.timeline import read_timeline, timeline_summary

    if as_json and as_text:
        raise click.UsageError("--json and --text exclude each other")
    timeline = read_timeline(run_dir, task_id, epoch)
    log.get(__name__).info(
        "sample.traced", run_dir=str(run_dir), task=task_id, epoch=timeline.epoch, events=timeline_summary(timeline)
    )
    piped = not sys.stdout.isatty()
    if as_json or (piped and not as_text):
        print_json(timeline)
    else:
        click.echo(render_text(timeline))
        for line in cost_lines(timeline):
            click.echo(line)


@click.command("export")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["atif", "inspect"]),
    required=True,
    help="atif: one ATIF v1.8 trajectory per sample; inspect: one Inspect eval log of the run.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder to write into (default: <run-id>.<format>/ beside the run folder).",
)
def export_command(run_dir: Path, fmt: str, out: Path | None) -> None:
    """Export a run's samples: ATIF trajectories (Harbor) or an Inspect eval log (inspect view).

    Example: ispm export runs/<run-id> --format inspect && inspect view --log-dir runs/<run-id>.inspect
    """
    # Imported when run, as the other nouns do: `ispm --help` loads no stage.
    from runner.trace.export import default_out, write_atif, write_inspect

    target = out or default_out(run_dir, "atif" if fmt == "atif" else "inspect")
    if fmt == "atif":
        files = write_atif(run_dir, target)
        click.echo(f"{target}: {len(files)} ATIF-v1.8 trajectories")
    else:
        path = write_inspect(run_dir, target)
        click.echo(f"{path}: Inspect eval log")
    log.get(__name__).info("run.exported", run_dir=str(run_dir), format=fmt, out=str(target))
