"""The ``ispm`` command, one module per noun. The only package that knows click: it parses, calls the library,
prints.

Each module defines its noun's commands (a group, or top-level commands); :data:`COMMANDS` adds them to
:func:`main` in one place. A new noun is a new module here and one entry there. Library errors (``IspmError``)
become messages and exit codes in :class:`~runner.cli.group.IspmGroup` only; data is printed by
:mod:`runner.cli.output` only.
"""

from __future__ import annotations

from pathlib import Path

import click

from runner import __version__, log
from runner.cli import analytics, board, grading, record, run, sandbox, schema, site, tasks, trace, world
from runner.cli.group import IspmGroup


@click.group(cls=IspmGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ispm")
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="ISPM_LOG_FILE",
    help="Append JSON logs here (default: $XDG_CACHE_HOME/ispm/ispm.jsonl).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show debug messages on the terminal.")
def main(log_file: Path | None, verbose: bool) -> None:
    """ISPM-Enterprise-SQL@v1: an agent benchmark over a frozen synthetic enterprise.

    Example: ispm world verify
    """
    log.configure(log_file or log.default_log_file(), verbose=verbose)


COMMANDS: tuple[click.Command, ...] = (
    world.world,
    tasks.tasks,
    grading.coverage_command,
    grading.consensus_command,
    grading.rubrics_command,
    grading.grade_command,
    sandbox.sandbox,
    sandbox.images_command,
    run.preflight_command,
    run.run_command,
    run.demo_command,
    analytics.analytics_command,
    record.audit_command,
    record.report_command,
    record.leaderboard_command,
    record.bundle_command,
    trace.trace_command,
    trace.export_command,
    schema.schema,
    board.board,
    board.submit,
    board.verify_command,
    site.site,
)
"""Every command and group under ``ispm``, by noun."""

for _command in COMMANDS:
    main.add_command(_command)

__all__ = ["main"]
