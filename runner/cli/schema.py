"""The ``ispm schema`` commands: the JSON Schemas of the contract files."""

from __future__ import annotations

import click

from runner.cli.output import print_json


@click.group()
def schema() -> None:
    """Print the JSON Schema of a contract file.

    Example: ispm schema answer
    """


@schema.command("answer")
def schema_answer() -> None:
    """Print the JSON Schema of /output/answer.json (ispm.answer/v1), for people who bring their own agent.

    Example: ispm schema answer > answer.schema.json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.contract import Answer

    print_json(Answer.model_json_schema())


@schema.command("run-record")
def schema_run_record() -> None:
    """Print the JSON Schema of a run's record.json (the public run record).

    Example: ispm schema run-record > run-record.schema.json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.record.model import RunRecord

    print_json(RunRecord.model_json_schema())
