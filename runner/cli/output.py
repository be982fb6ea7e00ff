"""How every command prints data: one JSON printer, and the shared ``--json`` option.

A command's ``--json`` prints one of two shapes, documented per command in the README's command table:

- **object**: one JSON value (an object, or a list for ``tasks list`` and ``preflight``), indented by 2, keys
  sorted;
- **lines**: JSON lines, one compact object per line, for commands whose output is a stream of rows
  (``consensus``, ``analytics``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click
from pydantic import BaseModel

F = TypeVar("F", bound=Callable[..., Any])


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def print_json(value: BaseModel | list[Any] | dict[str, Any]) -> None:
    """Print ``value`` as one JSON document (the **object** shape)."""
    click.echo(json.dumps(_plain(value), indent=2, sort_keys=True, default=str))


def print_json_lines(values: Iterable[BaseModel | dict[str, Any]]) -> None:
    """Print each of ``values`` as one compact JSON object on its own line (the **lines** shape)."""
    for value in values:
        click.echo(json.dumps(_plain(value), default=str))


def json_option(help_text: str) -> Callable[[F], F]:
    """The ``--json`` flag, passed to the command as ``as_json``; ``help_text`` says what is printed."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)
