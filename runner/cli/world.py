"""The ``ispm world`` commands: build, verify and describe the snapshot."""

from __future__ import annotations

from pathlib import Path

import click

from runner import log
from runner.cli.output import json_option, print_json
from runner.errors import WorldError
from runner.paths import world_dir
from runner.world import MANIFEST_NAME


@click.group()
def world() -> None:
    """Build, verify and describe the ispm-crossvendor-v1 snapshot.

    Example: ispm world info --json
    """


_world_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="World folder (default: the bundled world/).",
)


@world.command("build")
@_world_dir_option
def world_build(directory: Path | None) -> None:
    """Regenerate the snapshot, its docs and its manifest.

    Deterministic: two builds give the same logical digest on any machine.

    Example: ispm world build --dir /tmp/world
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.world.build import build

    manifest = build(directory or world_dir())
    log.get(__name__).info("world.built", logical_digest=manifest.logical_digest, sha256=manifest.snapshot.sha256)
    click.echo(
        f"built {manifest.dataset} rev {manifest.revision}: {len(manifest.tables)} tables, "
        f"{sum(t.rows for t in manifest.tables.values())} rows, {manifest.snapshot.bytes} bytes"
    )
    click.echo(f"logical digest {manifest.logical_digest}")
    click.echo(f"sha256         {manifest.snapshot.sha256}")


@world.command("verify")
@_world_dir_option
@json_option("Print the result as JSON.")
def world_verify(directory: Path | None, as_json: bool) -> None:
    """Check the snapshot, docs and manifest; exit 1 naming every difference.

    Example: ispm world verify
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.world.verify import verify

    target = directory or world_dir()
    try:
        check = verify(target)
    except WorldError as exc:
        log.get(__name__).info("world.verify_failed", world=str(target), problems=exc.problems)
        if as_json:
            print_json({"ok": False, "problems": exc.problems})
            raise click.exceptions.Exit(1) from exc
        raise
    log.get(__name__).info("world.verified", world=str(target), logical_digest=check.manifest.logical_digest)
    if as_json:
        print_json({"ok": True, "problems": [], "logical_digest": check.manifest.logical_digest})
    else:
        click.echo(
            f"ok: {check.manifest.dataset} matches its manifest (logical digest {check.manifest.logical_digest[:16]}…)"
        )


@world.command("info")
@_world_dir_option
@json_option("Print the summary as JSON.")
def world_info(directory: Path | None, as_json: bool) -> None:
    """List the vendors, their tables and row counts.

    Example: ispm world info
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.world.info import summarize
    from runner.world.manifest import load_manifest

    summary = summarize(load_manifest((directory or world_dir()) / MANIFEST_NAME))
    if as_json:
        print_json(summary)
        return
    click.echo(f"{summary.dataset} rev {summary.revision}, as of {summary.as_of}")
    for vendor in summary.vendors:
        click.echo(f"\n{vendor.vendor} ({vendor.prefix}_): {sum(vendor.tables.values())} rows")
        for table, rows in vendor.tables.items():
            click.echo(f"  {table:<40} {rows:>7}")
