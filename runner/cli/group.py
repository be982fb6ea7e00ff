"""The ``ispm`` group: library errors become a clear message and an exit code here, and only here."""

from __future__ import annotations

from typing import Any

import click
from pydantic import ValidationError

from runner.errors import IspmError


def validation_message(exc: ValidationError) -> str:
    """One line per refused value, ``field: why``, without pydantic's input echo and documentation link."""
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        why = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {why}" if where else why)
    return "; ".join(lines)


class IspmGroup(click.Group):
    """A click group whose commands may raise ``IspmError`` or a model's ``ValidationError``.

    Either ends the command with ``Error: <message>`` on stderr and exit code 1; any other exception is a bug
    and keeps its traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        """Run the chosen command, turning library errors into ``click.ClickException``."""
        try:
            return super().invoke(ctx)
        except IspmError as exc:
            raise click.ClickException(str(exc)) from exc
        except ValidationError as exc:
            raise click.ClickException(validation_message(exc)) from exc
