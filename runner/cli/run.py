"""The run commands: ``ispm preflight``, ``ispm run`` and ``ispm demo``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runner.cli.judges import JUDGE_HELP, judge_option
from runner.cli.output import json_option, print_json
from runner.grading.slots import is_reference
from runner.run.spec import MAX_RUN_COST_LIMIT_USD, MAX_SAMPLE_TOKEN_LIMIT

if TYPE_CHECKING:
    from runner.pipeline import RunResult


@click.command("preflight")
@click.option("--candidate", required=True, metavar="PROVIDER/MODEL", help="The candidate model, e.g. openai/gpt-4.1.")
@judge_option()
@click.option(
    "--no-dry-run",
    "skip_dry_run",
    is_flag=True,
    help="Only probe each model; skip the judges' dry run on the calibration set (ispm run never skips it).",
)
@click.option(
    "--agent-image",
    metavar="TAG",
    help="The agent image the run will use: its earlier runs' samples on the calibration tasks project the "
    "candidate's cost.",
)
@click.option(
    "--runs",
    "earlier",
    type=click.Path(file_okay=False, path_type=Path),
    default="runs",
    show_default=True,
    help="Where the earlier runs are (with --agent-image).",
)
@json_option("Print the resolved models (and judges' dry runs) as JSON.")
def preflight_command(
    candidate: str, judges: tuple[str, ...], skip_dry_run: bool, agent_image: str | None, earlier: Path, as_json: bool
) -> None:
    """Probe the candidate and each model judge, then have each model judge grade the calibration set.

    Each model gets one minimal request; the model id each provider returned is printed. Then each judge grades
    the calibration set shipped with the task set (the gold replay agent's and the null agent's answers on a few
    tasks) with the real rubrics and prompt: every reply must parse, gold must be graded correct and null
    incorrect on answer_correctness. The dry run's tokens and latency are printed with a projection of each
    judge's tokens over an official run (every task, 5 epochs). With --agent-image, the candidate's cost over that
    run is projected too, as a range, from the agent's tokens on the calibration tasks in earlier runs of that image
    under --runs (records only: nothing is spent); a model the price data does not know gets tokens and a note.

    Keys and endpoints come from the host environment only: OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL. Exits 1 with one line per problem: a missing key (naming its variable), an unknown
    alias, an endpoint that cannot be reached or refuses the probe, a judge that fails its dry run (naming the
    judge, the dimension and what came back). No request is sent unless every alias is known and has its key.
    A reference judge slot (ref, ref#N) is offline: nothing to probe or dry-run.

    Example: ispm preflight --candidate openai/gpt-4.1 --judge anthropic/claude-sonnet-4-6 --judge openai/o3
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.gateway.preflight import preflight
    from runner.grading.grade import make_judges
    from runner.grading.rubric import load_rubrics
    from runner.pipeline import dry_run, project_candidate
    from runner.record.cost import candidate_lines, projection_lines
    from runner.run.spec import V1_EPOCHS
    from runner.tasks.catalog import catalog

    models = [j for j in judges if not is_reference(j)]
    roles = ["candidate"] + ["judge"] * len(models)
    resolved = preflight([candidate, *models])
    dry_runs = {}
    planned = len(catalog().tasks) * V1_EPOCHS
    if models and not skip_dry_run:
        rubrics = load_rubrics()
        slots = make_judges(models, rubrics)
        dry_runs = {d.judge: d for d in dry_run(slots, planned, rubrics)}
    projection, calibration_tasks = (
        project_candidate(candidate, agent_image, planned, earlier) if agent_image else (None, set())
    )
    if as_json:
        payload = []
        for role, m in zip(roles, resolved, strict=True):
            entry = {"role": role, **m.model_dump(mode="json")}
            if role == "judge" and m.alias in dry_runs:
                entry["dry_run"] = dry_runs[m.alias].model_dump(mode="json")
            if role == "candidate" and projection is not None:
                entry["projection"] = projection.model_dump(mode="json")
            payload.append(entry)
        print_json(payload)
        return
    for role, model in zip(roles, resolved, strict=True):
        returned = model.returned_model or "(the provider returned no model id)"
        click.echo(f"{role:<9}  {model.alias}  ->  {returned}  ({model.latency_s:.2f} s, {model.base_url})")
    for d in dry_runs.values():
        click.echo(d.summary_line())
    for line in projection_lines(list(dry_runs.values())):
        click.echo(line)
    if agent_image:
        for line in candidate_lines(projection, list(dry_runs.values()), f"{earlier}/", calibration_tasks):
            click.echo(line)


def _finite_dollars(value: float | None) -> float | None:
    # click's range lets NaN through (every comparison with it is false).
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of dollars", param_hint="'--run-cost-limit'")
    return value


@click.command("run")
@click.option(
    "--agent-image",
    help="The agent image: any tag, a shipped agent by name (reference, claude-code, openai-agents, mini-swe-agent), "
    "or replay / null for the built-in calibration agents (gold answers / none, as ispm demo runs them).",
)
@click.option("--candidate", help="The candidate model the agent runs against, provider/model.")
@judge_option(JUDGE_HELP.removesuffix("repeat for each slot.") + "give two.")
@click.option("--epochs", type=click.IntRange(1, 100), default=5, show_default=True, help="Epochs per task.")
@click.option("--concurrency", type=click.IntRange(1, 64), default=2, show_default=True, help="Samples at once.")
@click.option(
    "--breaker-after",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Stop the run when a judge, or the candidate, fails on this many consecutive samples (official: 10).",
)
@click.option("--task", "task_ids", multiple=True, help="Only this task (repeat); official runs refuse a filter.")
@click.option(
    "--backend",
    type=click.Choice(["docker", "local", "ray"]),
    default="docker",
    show_default=True,
    help="Where samples run: this machine's Docker, a local process (tests), or a Ray cluster's Docker hosts.",
)
@click.option(
    "--ray-address",
    envvar="RAY_ADDRESS",
    metavar="HOST:PORT",
    help="The Ray cluster's head for --backend ray (default: RAY_ADDRESS).",
)
@click.option(
    "--sample-token-limit",
    type=click.IntRange(1, MAX_SAMPLE_TOKEN_LIMIT),
    metavar="N",
    help="Local runs: input plus output tokens one sample's agent may use; past them its next model call is refused "
    "and the sample ends as token_limit. Never with --official.",
)
@click.option(
    "--run-cost-limit",
    type=click.FloatRange(0, MAX_RUN_COST_LIMIT_USD, min_open=True),
    callback=lambda _ctx, _param, value: _finite_dollars(value),
    metavar="USD",
    help="Local runs: dollars the whole run may spend (agent and judges, priced as the report prices them); once "
    "reached no new sample starts and the agent's calls are refused. Never with --official.",
)
@click.option("--official", is_flag=True, help="Lock every value to v1 and refuse anything that is not.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Run folder [runs/<run-id>].")
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Continue the run in this folder with its own spec; nothing already graded is redone.",
)
def run_command(
    agent_image: str | None,
    candidate: str | None,
    judges: tuple[str, ...],
    epochs: int,
    concurrency: int,
    breaker_after: int,
    task_ids: tuple[str, ...],
    backend: str,
    ray_address: str | None,
    sample_token_limit: int | None,
    run_cost_limit: float | None,
    official: bool,
    run_dir: Path | None,
    resume_dir: Path | None,
) -> None:
    """Run the benchmark: tasks × epochs in fresh sandboxes, graded by two judges, into runs/<run-id>/.

    Preflight comes first: each model is probed and each model judge grades the calibration set (see ispm
    preflight); a judge that cannot grade stops the run before any sample. During the run, a judge or the candidate
    failing on --breaker-after consecutive samples stops it (exit 1, with the reason); fix the cause, then continue
    with --resume.

    Example: ispm run --agent-image me/agent:1 --candidate openai/gpt-4.1 --judge anthropic/claude-sonnet-4-6
    --judge openai/gpt-4.1 --official

    Example: ispm run --resume runs/20261130T060000Z-a1b2c3

    Example: ispm run --backend ray --ray-address head:6379 --agent-image replay --judge ref#1 --judge ref#2
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.pipeline import check_priced, resume_run, run_preflight, start_run
    from runner.run.calibration import calibration_of
    from runner.run.digests import current_digests
    from runner.run.spec import RunSpec
    from runner.run.spec import official as make_official

    if resume_dir is not None:
        result = resume_run(resume_dir, ray_address=ray_address)
    else:
        if not agent_image:
            raise click.UsageError("--agent-image is required (or --resume RUN_DIR)")
        if len(judges) != 2:
            raise click.UsageError(f"give exactly two --judge options, got {len(judges)}")
        # The built-in replay and null agents make a calibration run, as under ispm demo: the replay agent gets the
        # gold recordings, and neither uses a model.
        calibration = calibration_of(agent_image)
        if calibration is not None and candidate:
            click.echo(f"note: the {calibration} agent uses no model; --candidate {candidate} is not used", err=True)
            candidate = None
        spec = RunSpec(
            agent_image=agent_image,
            candidate=candidate,
            calibration=calibration,
            judges=(judges[0], judges[1]),
            epochs=epochs,
            concurrency=concurrency,
            breaker_after=breaker_after,
            tasks=list(task_ids) or None,
            backend=backend,  # type: ignore[arg-type]
            sample_token_limit=sample_token_limit,
            run_cost_limit_usd=run_cost_limit,
        )
        if official:
            spec = make_official(spec, current_digests())
        check_priced(spec)  # before preflight spends anything
        checked = run_preflight(spec, ray_address=ray_address)
        for line in checked.summary_lines():
            click.echo(line)
        result = start_run(spec, run_dir, preflight=checked, ray_address=ray_address)
    _print_run_result(result)
    if result.outcome == "stopped":
        raise click.exceptions.Exit(1)


@click.command("demo")
@click.option(
    "--agent",
    type=click.Choice(["replay", "null"]),
    default="replay",
    show_default=True,
    help="replay: the gold answers (must score 100%); null: no answer (must score 0%).",
)
@click.option("--epochs", type=click.IntRange(1, 100), default=1, show_default=True, help="Epochs per task.")
@click.option("--concurrency", type=click.IntRange(1, 64), default=2, show_default=True, help="Samples at once.")
@click.option("--task", "task_ids", multiple=True, help="Only this task (repeat).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Run folder [runs/<run-id>].")
def demo_command(agent: str, epochs: int, concurrency: int, task_ids: tuple[str, ...], run_dir: Path | None) -> None:
    """Calibrate the harness: every task in Docker with the gold replay (or null) agent and the ref judge.

    No API key is needed. This is a calibration run, never an official one (those are 5 epochs with two
    model judges); it runs 1 epoch unless told otherwise.

    Example: ispm demo --agent null
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.pipeline import run_calibration

    result = run_calibration(
        agent,  # type: ignore[arg-type]
        epochs=epochs,
        concurrency=concurrency,
        tasks=list(task_ids) or None,
        run_dir=run_dir,
    )
    _print_run_result(result)


def _print_run_result(result: RunResult) -> None:
    for line in result.summary_lines():
        click.echo(line)
