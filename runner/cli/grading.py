"""The grading commands: ``ispm coverage``, ``consensus``, ``rubrics`` and ``grade``."""

from __future__ import annotations

from pathlib import Path

import click

from runner.cli.judges import judge_option
from runner.cli.output import json_option, print_json, print_json_lines
from runner.paths import world_dir
from runner.world import SNAPSHOT_NAME


@click.command("coverage")
@click.option(
    "--witness",
    "witness_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File with the witness SQL (one or more ;-separated statements).",
)
@click.option(
    "--agent",
    "agent_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File with the agent's SQL (one or more ;-separated statements).",
)
@json_option("Print the coverage report as one JSON object.")
def coverage_command(witness_path: Path, agent_path: Path, as_json: bool) -> None:
    """Structural coverage: which of the witness SQL's tables and joins the agent's SQL touched.

    Example: ispm coverage --witness witness.sql --agent agent.sql --json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.grading.coverage import SqlSchema, coverage_from_files
    from runner.world.generate import all_tables

    schema = SqlSchema({t.name: t.column_names for t in all_tables()})
    report = coverage_from_files(witness_path, agent_path, schema)
    if as_json:
        print_json(report)
        return

    def recall(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    click.echo(f"tables  recall {recall(report.table_recall)}  witness {', '.join(report.witness_tables)}")
    click.echo(f"        agent {', '.join(report.agent_tables) or '-'}  extra {', '.join(report.extra_tables) or '-'}")
    agent_joins = {tuple(map(tuple, j)) for j in report.agent_joins}
    click.echo(f"joins   recall {recall(report.join_recall)}")
    for (lt, lc), (rt, rc) in report.witness_joins:
        mark = "✓" if ((lt, lc), (rt, rc)) in agent_joins else "✗"
        click.echo(f"  {mark} {lt}.{lc} = {rt}.{rc}")
    witness_joins = {tuple(map(tuple, j)) for j in report.witness_joins}
    for (lt, lc), (rt, rc) in report.agent_joins:
        if ((lt, lc), (rt, rc)) not in witness_joins:
            click.echo(f"  + {lt}.{lc} = {rt}.{rc}")
    click.echo(f"unparsed {report.unparsed}")


@click.command("consensus")
@click.argument("votes", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option("Print one JSON object per (task_id, dimension).")
def consensus_command(votes: Path, as_json: bool) -> None:
    """Recompute the v1 consensus from raw judge votes (one JSON vote per line).

    Within an epoch the lowest non-abstaining grade wins; across epochs the mode wins and ties go down.

    Example: ispm consensus votes.jsonl --json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from collections import Counter

    from runner.grading.consensus import consensus_from_jsonl

    results = consensus_from_jsonl(votes)
    if as_json:
        print_json_lines(results)
        return
    click.echo(f"{'TASK':<12} {'DIMENSION':<32} {'GRADE':<10} EPOCHS")
    for r in results:
        epochs = " ".join(f"{e}:{g}" for e, g in sorted(r.epochs.items()))
        click.echo(f"{r.task_id:<12} {r.dimension:<32} {r.grade:<10} {epochs}")
    counts = Counter(r.grade for r in results)
    click.echo(", ".join(f"{counts.get(g, 0)} {g}" for g in ("correct", "partial", "incorrect", "abstain")))


@click.command("rubrics")
@json_option("Print versions, hashes and the set digest as one JSON object.")
def rubrics_command(as_json: bool) -> None:
    """List the judges' rubrics: each dimension's version and sha256, and the rubric-set digest.

    Example: ispm rubrics --json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.grading.rubric import load_rubrics

    rubrics = load_rubrics()
    if as_json:
        versions = {d: {"version": r.version, "sha256": r.sha256} for d, r in rubrics.rubrics.items()}
        print_json({"digest": rubrics.digest, "rubrics": versions})
        return
    for dimension, rubric in rubrics.rubrics.items():
        click.echo(f"{dimension:<32} v{rubric.version}  {rubric.sha256}")
    click.echo(f"rubric set {rubrics.digest}")


@click.command("grade")
@click.argument("sample_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@judge_option(default=("ref",))
@json_option("Print the whole sample grade as JSON.")
def grade_command(sample_path: Path, judges: tuple[str, ...], as_json: bool) -> None:
    """Grade one collected sample (a SampleOutput JSON file): replay, entities, coverage, judges.

    Judges take the slots of ispm run, so a sample is regraded as its run graded it (keys from the environment).

    Example: ispm grade sample.json --judge ref#1 --judge openai/gpt-4.1 --json
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from pydantic import ValidationError

    from runner.contract import SampleOutput
    from runner.grading.grade import GradingContext, grade_sample, make_judges
    from runner.tasks.catalog import catalog

    try:
        sample = SampleOutput.model_validate_json(sample_path.read_bytes())
    except ValidationError as exc:
        raise click.ClickException(f"{sample_path}: not a sample output: {exc.errors()[0]['msg']}") from exc
    tasks, truth = catalog().by_id, catalog().truths
    if sample.task_id not in tasks or sample.task_id not in truth:
        raise click.ClickException(f"{sample_path}: unknown task {sample.task_id}")
    with GradingContext(world_dir() / SNAPSHOT_NAME) as context:
        slots = make_judges(judges, context.rubrics)
        task = tasks[sample.task_id]
        result = grade_sample(task, truth[sample.task_id], sample, slots, sample.epoch, context=context)
    if as_json:
        print_json(result)
        return
    for line in result.summary_lines():
        click.echo(line)
