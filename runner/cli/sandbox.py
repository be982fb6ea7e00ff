"""The sandbox commands: ``ispm sandbox try|sweep`` and ``ispm images``."""

from __future__ import annotations

from pathlib import Path

import click

from runner.cli.output import json_option, print_json


@click.group()
def sandbox() -> None:
    """Run one sample by hand, and remove what crashed runs left behind.

    Example: ispm sandbox try --image null --task ispm-001
    """


@sandbox.command("try")
@click.option("--image", required=True, help="Agent image: any tag, or null / replay for the built-in agents.")
@click.option("--task", "task_id", required=True, help="Task id, e.g. ispm-001.")
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="Seconds before the agent is killed.",
)
@click.option(
    "--replay-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Recordings for the replay agent, mounted at /replay (they hold gold answers: never official).",
)
@click.option(
    "--backend",
    type=click.Choice(["docker", "local"]),
    default="docker",
    show_default=True,
    help="Where the agent runs; local isolates nothing (development only).",
)
@json_option("Print the whole collected sample output as JSON.")
def sandbox_try(
    image: str, task_id: str, time_limit: float, replay_dir: Path | None, backend: str, as_json: bool
) -> None:
    """Run one sample of one task with any agent image and print what was collected.

    The first thing to run when you bring your own image. Exits 1 unless the sample's status is ok.

    Example: ispm sandbox try --image ispm/my-agent:dev --task ispm-001 --json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.sandbox.trial import sample_summary, try_sample

    out = try_sample(
        image,
        task_id,
        backend="local" if backend == "local" else "docker",
        time_limit_s=time_limit,
        replay_dir=replay_dir,
    )
    if as_json:
        print_json(out)
    else:
        for line in sample_summary(out):
            click.echo(line)
    if out.status != "ok":
        raise click.exceptions.Exit(1)


@sandbox.command("sweep")
@click.option("--run", "run_id", help="Only this run's resources (the ispm.run label).")
@json_option("Print what was removed as JSON.")
def sandbox_sweep(run_id: str | None, as_json: bool) -> None:
    """Remove every sandbox container, volume and network (label ispm.sandbox), and stale scratch folders.

    Every runner start already removes what dead runners left; this removes everything, live runs included.

    Example: ispm sandbox sweep --run try
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.sandbox.trial import sweep_sandbox

    report = sweep_sandbox(run_id)
    if as_json:
        print_json(report)
        return
    click.echo(
        f"removed {len(report.containers)} containers, {len(report.volumes)} volumes, "
        f"{len(report.networks)} networks, {len(report.directories)} scratch folders"
    )
    for failure in report.failures:
        click.echo(f"could not remove {failure}", err=True)
    if report.failures:
        raise click.exceptions.Exit(1)


@click.command("images")
@click.option("--prune", is_flag=True, help="Then remove the out-of-date tags of ispm's own images.")
@json_option("Print the image record (every image's tag, id and input digest) as JSON.")
def images_command(prune: bool, as_json: bool) -> None:
    """Build the sandbox images that are missing or out of date, and list them (what make images runs).

    Each image is tagged by a digest of its inputs, so an unchanged image is reused, not rebuilt.

    Example: ispm images --prune
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.sandbox.images import ImageRecord, ensure_images, prune_stale

    refs = ensure_images()
    pruned = prune_stale(keep=refs) if prune else []
    if as_json:
        print_json(ImageRecord(images=refs))
        return
    for ref in refs.values():
        state = f"built in {ref.seconds:.1f}s" if ref.built else "reused"
        click.echo(f"{ref.tag:<32} {ref.id[:19]}  {state}")
    for tag in pruned:
        click.echo(f"{tag:<32} removed (out of date)")
