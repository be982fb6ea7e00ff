"""The one ``--judge`` option of every command that grades or probes judges (``ispm run``, ``grade``,
``preflight``): the same slots, read the same way, so a sample is regraded exactly as its run graded it."""

from __future__ import annotations

from collections.abc import Callable

import click

from runner.cli.output import F
from runner.grading.slots import slots_problem

JUDGE_HELP = "A judge slot: ref / ref#N (the offline reference judge) or provider/model; repeat for each slot."


def judge_option(help_text: str = JUDGE_HELP, default: tuple[str, ...] = ()) -> Callable[[F], F]:
    """``--judge`` (repeatable), passed to the command as ``judges``; slots with one alias are refused at once."""
    return click.option(
        "--judge",
        "judges",
        multiple=True,
        default=default,
        show_default=bool(default),
        metavar="SLOT",
        callback=_distinct_slots,
        help=help_text,
    )


def _distinct_slots(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    problem = slots_problem(value)
    if problem is not None:
        raise click.ClickException(f"judges: {problem}")
    return value
