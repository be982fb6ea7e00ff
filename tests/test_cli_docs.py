"""Docs cannot drift: every command has help with an example, and the README names it."""

from __future__ import annotations

from pathlib import Path

import click

from runner.cli import main

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _walk(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        found.append((path, command))
        if isinstance(command, click.Group):
            found += _walk(command, path)
    return found


def test_every_command_has_help_with_an_example() -> None:
    commands = _walk(main)
    assert len(commands) >= 10
    for path, command in commands:
        assert command.help, f"ispm {' '.join(path)} has no help"
        assert "Example: ispm" in command.help, f"ispm {' '.join(path)} has no example"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, f"ispm {' '.join(path)} {param.opts[0]} has no help"


def test_every_command_is_in_the_readme() -> None:
    for path, command in _walk(main):
        if isinstance(command, click.Group):
            continue
        assert f"`ispm {' '.join(path)}" in README, f"ispm {' '.join(path)} is not in the README"
