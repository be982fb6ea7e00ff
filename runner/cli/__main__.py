"""``python -m runner.cli``: the ``ispm`` command."""

from runner.cli import main

main(prog_name="ispm")
