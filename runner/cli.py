"""The ``ispm`` command. The only module that knows click: it parses, calls the library, prints.

Library errors (``IspmError``) become ``click.ClickException`` here and only here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from pydantic import BaseModel, ValidationError

from runner import __version__, log
from runner.errors import IspmError, WorldError
from runner.paths import world_dir

if TYPE_CHECKING:
    from runner.run.start import RunResult

F = TypeVar("F", bound=Callable[..., Any])


def _errors_to_exit(func: F) -> F:
    """Turn library errors, and values a model refuses, into a clean message and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except IspmError as exc:
            raise click.ClickException(str(exc)) from exc
        except ValidationError as exc:
            raise click.ClickException(validation_message(exc)) from exc

    return wrapper  # type: ignore[return-value]


def validation_message(exc: ValidationError) -> str:
    """One line per refused value, ``field: why``, without pydantic's input echo and documentation link."""
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        why = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {why}" if where else why)
    return "; ".join(lines)


def _print_json(value: BaseModel | list[Any] | dict[str, Any]) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    click.echo(json.dumps(value, indent=2, sort_keys=True))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


# --------------------------------------------------------------------------------------- world
@main.group()
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
@_errors_to_exit
def world_build(directory: Path | None) -> None:
    """Regenerate the snapshot, its docs and its manifest.

    Deterministic: two builds give the same logical digest on any machine.

    Example: ispm world build --dir /tmp/world
    """
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
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def world_verify(directory: Path | None, as_json: bool) -> None:
    """Check the snapshot, docs and manifest; exit 1 naming every difference.

    Example: ispm world verify
    """
    from runner.world.verify import verify

    target = directory or world_dir()
    try:
        check = verify(target)
    except WorldError as exc:
        log.get(__name__).info("world.verify_failed", world=str(target), problems=exc.problems)
        if as_json:
            _print_json({"ok": False, "problems": exc.problems})
            raise SystemExit(1) from exc
        raise click.ClickException(str(exc)) from exc
    log.get(__name__).info("world.verified", world=str(target), logical_digest=check.manifest.logical_digest)
    if as_json:
        _print_json({"ok": True, "problems": [], "logical_digest": check.manifest.logical_digest})
    else:
        click.echo(
            f"ok: {check.manifest.dataset} matches its manifest (logical digest {check.manifest.logical_digest[:16]}…)"
        )


@world.command("info")
@_world_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@_errors_to_exit
def world_info(directory: Path | None, as_json: bool) -> None:
    """List the vendors, their tables and row counts.

    Example: ispm world info
    """
    from runner.world import MANIFEST_NAME
    from runner.world.info import summarize
    from runner.world.manifest import load_manifest

    summary = summarize(load_manifest((directory or world_dir()) / MANIFEST_NAME))
    if as_json:
        _print_json(summary)
        return
    click.echo(f"{summary.dataset} rev {summary.revision}, as of {summary.as_of}")
    for vendor in summary.vendors:
        click.echo(f"\n{vendor.vendor} ({vendor.prefix}_): {sum(vendor.tables.values())} rows")
        for table, rows in vendor.tables.items():
            click.echo(f"  {table:<40} {rows:>7}")


# --------------------------------------------------------------------------------------- tasks
@main.group()
def tasks() -> None:
    """List, show, check and verify the 127 v1 tasks and their ground truth.

    Example: ispm tasks list --vendor okta --kind verdict
    """


@tasks.command("list")
@click.option(
    "--vendor",
    type=click.Choice(["hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas"]),
    help="Only tasks touching this vendor.",
)
@click.option("--kind", type=click.Choice(["verdict", "enumeration"]), help="Only this kind.")
@click.option("--category", help="Only this category, e.g. offboarding.")
@click.option("--difficulty", type=click.Choice(["easy", "medium", "hard", "expert"]), help="Only this difficulty.")
@click.option("--hops", type=click.IntRange(1, 3), help="Only tasks with this many hops.")
@click.option("--json", "as_json", is_flag=True, help="Print the tasks as JSON (agent-visible fields only).")
@_errors_to_exit
def tasks_list(
    vendor: str | None,
    kind: str | None,
    category: str | None,
    difficulty: str | None,
    hops: int | None,
    as_json: bool,
) -> None:
    """List tasks, optionally filtered.

    Example: ispm tasks list --category offboarding --hops 3 --json
    """
    from runner.paths import tasks_dir
    from runner.tasks.catalog import TaskFilter
    from runner.tasks.load import load_tasks

    chosen = [
        t
        for t in load_tasks(tasks_dir())
        if TaskFilter(vendor=vendor, kind=kind, category=category, difficulty=difficulty, hops=hops).matches(t)
    ]
    if as_json:
        _print_json(
            [
                t.model_dump(mode="json", include={"id", "title", "kind", "category", "vendors", "hops", "difficulty"})
                for t in chosen
            ]
        )
        return
    for t in chosen:
        click.echo(
            f"{t.id}  {t.kind:<11} {t.difficulty:<6} hops={t.hops}  {t.category:<26} "
            f"{','.join(t.vendors):<24} {t.title}"
        )
    click.echo(f"{len(chosen)} tasks")


@tasks.command("show")
@click.argument("task_id")
@click.option("--with-truth", is_flag=True, help="Add the host's view: witness SQL and ground truth.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@_errors_to_exit
def tasks_show(task_id: str, with_truth: bool, as_json: bool) -> None:
    """Show exactly the files a container gets for TASK_ID (/task/prompt.md, /task/task.json).

    Example: ispm tasks show ispm-001 --with-truth
    """
    from runner.errors import TaskError
    from runner.paths import tasks_dir
    from runner.tasks.load import load_tasks
    from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth
    from runner.tasks.view import agent_files

    by_id = {t.id: t for t in load_tasks(tasks_dir())}
    if task_id not in by_id:
        raise TaskError(f"no such task: {task_id}")
    task = by_id[task_id]
    files = agent_files(task)
    host: dict[str, Any] = {}
    if with_truth:
        truth = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks.get(task_id)
        host = {
            "witness_sql": task.witness_sql,
            "dual_sql": task.dual_sql,
            "entity_columns": [e.model_dump() for e in task.entity_columns],
            "ground_truth": truth.model_dump(mode="json") if truth else None,
        }
    if as_json:
        _print_json({"agent_files": files, **({"host": host} if with_truth else {})})
        return
    for name, text in files.items():
        click.echo(f"==> /task/{name} <==\n{text}")
    if with_truth:
        click.echo("==> host only: witness SQL <==\n" + task.witness_sql.strip() + "\n")
        click.echo("==> host only: ground truth <==\n" + json.dumps(host["ground_truth"], indent=2))


@tasks.command("check")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@_errors_to_exit
def tasks_check(paths: tuple[Path, ...]) -> None:
    """Validate task files and run both witnesses, without writing anything (for task authors).

    Example: ispm tasks check tasks/v1/ispm-001.yaml
    """
    from runner.tasks.load import load_task_file
    from runner.tasks.truth import derive_task
    from runner.world.digest import open_readonly
    from runner.world.verify import verify

    conn = open_readonly(verify(world_dir()).snapshot)
    for path in paths:
        truth = derive_task(load_task_file(path), conn)
        click.echo(
            f"{truth.task_id}: {truth.row_count} rows, {len(truth.entities)} entities"
            + (f", verdict {truth.verdict}" if truth.verdict else "")
        )


@tasks.command("derive")
@_errors_to_exit
def tasks_derive() -> None:
    """Derive the ground truth of every task from the world and write tasks/ground_truth.json.

    Example: ispm tasks derive
    """
    from runner.paths import tasks_dir
    from runner.tasks.catalog import derive_all
    from runner.tasks.truth import GROUND_TRUTH_NAME, write_ground_truth

    truth = derive_all(tasks_dir(), world_dir())
    write_ground_truth(tasks_dir() / GROUND_TRUTH_NAME, truth)
    click.echo(
        f"derived {len(truth.tasks)} tasks; task set {truth.task_set_digest[:16]}…, "
        f"ground truth {truth.ground_truth_digest[:16]}…"
    )


@tasks.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Print the task mix as JSON on success.")
@_errors_to_exit
def tasks_verify(as_json: bool) -> None:
    """Re-derive all ground truth from the world; exit 1 naming every task that differs.

    Example: ispm tasks verify
    """
    from runner.paths import tasks_dir
    from runner.tasks.catalog import mix, verify_all
    from runner.tasks.load import load_tasks

    truth = verify_all(tasks_dir(), world_dir())
    summary = mix(load_tasks(tasks_dir()), truth)
    if as_json:
        _print_json(summary)
        return
    click.echo(
        f"ok: {summary.total} tasks match the world; {summary.verdict} verdict "
        f"({summary.verdict_yes} yes), {summary.multi_vendor} multi-vendor, {summary.three_hop} three-hop"
    )


# --------------------------------------------------------------------------------------- grading
@main.command("coverage")
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
@click.option("--json", "as_json", is_flag=True, help="Print the coverage report as one JSON object.")
@_errors_to_exit
def coverage_command(witness_path: Path, agent_path: Path, as_json: bool) -> None:
    """Structural coverage: which of the witness SQL's tables and joins the agent's SQL touched.

    Example: ispm coverage --witness witness.sql --agent agent.sql --json
    """
    from runner.grading.coverage import SqlSchema, coverage_from_files
    from runner.world.generate import all_tables

    schema = SqlSchema({t.name: t.column_names for t in all_tables()})
    report = coverage_from_files(witness_path, agent_path, schema)
    if as_json:
        click.echo(report.model_dump_json())
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


@main.command("consensus")
@click.argument("votes", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per (task_id, dimension).")
@_errors_to_exit
def consensus_command(votes: Path, as_json: bool) -> None:
    """Recompute the v1 consensus from raw judge votes (one JSON vote per line).

    Within an epoch the lowest non-abstaining grade wins; across epochs the mode wins and ties go down.

    Example: ispm consensus votes.jsonl --json
    """
    from collections import Counter

    from runner.grading.consensus import consensus_from_jsonl

    results = consensus_from_jsonl(votes)
    if as_json:
        for result in results:
            click.echo(result.model_dump_json())
        return
    click.echo(f"{'TASK':<12} {'DIMENSION':<32} {'GRADE':<10} EPOCHS")
    for r in results:
        epochs = " ".join(f"{e}:{g}" for e, g in sorted(r.epochs.items()))
        click.echo(f"{r.task_id:<12} {r.dimension:<32} {r.grade:<10} {epochs}")
    counts = Counter(r.grade for r in results)
    click.echo(", ".join(f"{counts.get(g, 0)} {g}" for g in ("correct", "partial", "incorrect", "abstain")))


@main.command("rubrics")
@click.option("--json", "as_json", is_flag=True, help="Print versions, hashes and the set digest as one JSON object.")
@_errors_to_exit
def rubrics_command(as_json: bool) -> None:
    """List the judges' rubrics: each dimension's version and sha256, and the rubric-set digest.

    Example: ispm rubrics --json
    """
    from runner.grading.rubric import load_rubrics

    rubrics = load_rubrics()
    if as_json:
        versions = {d: {"version": r.version, "sha256": r.sha256} for d, r in rubrics.rubrics.items()}
        click.echo(json.dumps({"digest": rubrics.digest, "rubrics": versions}))
        return
    for dimension, rubric in rubrics.rubrics.items():
        click.echo(f"{dimension:<32} v{rubric.version}  {rubric.sha256}")
    click.echo(f"rubric set {rubrics.digest}")


@main.command("grade")
@click.argument("sample_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--judge",
    "judges",
    multiple=True,
    default=("ref",),
    show_default=True,
    help="A judge slot: ref, or provider/model (keys from the environment). Repeat for two slots.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole sample grade as JSON.")
@_errors_to_exit
def grade_command(sample_path: Path, judges: tuple[str, ...], as_json: bool) -> None:
    """Grade one collected sample (a SampleOutput JSON file): replay, entities, coverage, judges.

    Example: ispm grade sample.json --judge ref --judge openai/gpt-4.1 --json
    """
    from pydantic import ValidationError

    from runner.contract import SampleOutput
    from runner.grading.grade import GradingContext, grade_sample
    from runner.grading.judge import Judge, LLMJudge
    from runner.grading.reference_judge import ReferenceJudge
    from runner.paths import tasks_dir
    from runner.tasks.load import load_tasks
    from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth
    from runner.world import SNAPSHOT_NAME

    try:
        sample = SampleOutput.model_validate_json(sample_path.read_bytes())
    except ValidationError as exc:
        raise click.ClickException(f"{sample_path}: not a sample output: {exc.errors()[0]['msg']}") from exc
    tasks = {t.id: t for t in load_tasks(tasks_dir())}
    truth = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
    if sample.task_id not in tasks or sample.task_id not in truth:
        raise click.ClickException(f"{sample_path}: unknown task {sample.task_id}")
    with GradingContext(world_dir() / SNAPSHOT_NAME) as context:
        slots: list[Judge] = [
            ReferenceJudge(j, rubrics=context.rubrics) if j == "ref" else LLMJudge(j, rubrics=context.rubrics)
            for j in judges
        ]
        task = tasks[sample.task_id]
        result = grade_sample(task, truth[sample.task_id], sample, slots, sample.epoch, context=context)
    if as_json:
        _print_json(result)
        return
    for line in result.summary_lines():
        click.echo(line)


# --------------------------------------------------------------------------------------- sandbox
@main.group()
def sandbox() -> None:
    """Run one sample by hand, and remove what crashed runs left behind.

    Example: ispm sandbox try --image null --task ispm-001
    """


@sandbox.command("try")
@click.option("--image", required=True, help="Agent image: any tag, or null / replay for the built-in agents.")
@click.option("--task", "task_id", required=True, help="Task id, e.g. ispm-001.")
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="Seconds before the agent is killed.",
)
@click.option(
    "--replay-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Recordings for the replay agent, mounted at /replay (they hold gold answers: never official).",
)
@click.option(
    "--backend",
    type=click.Choice(["docker", "local"]),
    default="docker",
    show_default=True,
    help="Where the agent runs; local isolates nothing (development only).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole collected sample output as JSON.")
@_errors_to_exit
def sandbox_try(
    image: str, task_id: str, time_limit: float, replay_dir: Path | None, backend: str, as_json: bool
) -> None:
    """Run one sample of one task with any agent image and print what was collected.

    The first thing to run when you bring your own image. Exits 1 unless the sample's status is ok.

    Example: ispm sandbox try --image ispm/my-agent:dev --task ispm-001 --json
    """
    from runner.sandbox.trial import sample_summary, try_sample

    out = try_sample(
        image,
        task_id,
        backend="local" if backend == "local" else "docker",
        time_limit_s=time_limit,
        replay_dir=replay_dir,
    )
    if as_json:
        _print_json(out)
    else:
        for line in sample_summary(out):
            click.echo(line)
    if out.status != "ok":
        raise click.exceptions.Exit(1)


@sandbox.command("sweep")
@click.option("--run", "run_id", help="Only this run's resources (the ispm.run label).")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@_errors_to_exit
def sandbox_sweep(run_id: str | None, as_json: bool) -> None:
    """Remove every sandbox container, volume and network (label ispm.sandbox), and stale scratch folders.

    Every runner start already removes what dead runners left; this removes everything, live runs included.

    Example: ispm sandbox sweep --run try
    """
    from runner.sandbox.trial import sweep_sandbox

    report = sweep_sandbox(run_id)
    if as_json:
        _print_json(report)
        return
    click.echo(
        f"removed {len(report.containers)} containers, {len(report.volumes)} volumes, "
        f"{len(report.networks)} networks, {len(report.directories)} scratch folders"
    )
    for failure in report.failures:
        click.echo(f"could not remove {failure}", err=True)
    if report.failures:
        raise click.exceptions.Exit(1)


# --------------------------------------------------------------------------------------- preflight
@main.command("preflight")
@click.option("--candidate", required=True, metavar="PROVIDER/MODEL", help="The candidate model, e.g. openai/gpt-4.1.")
@click.option(
    "--judge",
    "judges",
    multiple=True,
    metavar="PROVIDER/MODEL",
    help="A judge model, e.g. anthropic/claude-sonnet-4-6; repeat the option for each judge.",
)
@click.option(
    "--no-dry-run",
    "skip_dry_run",
    is_flag=True,
    help="Only probe each model; skip the judges' dry run on the calibration set (ispm run never skips it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the resolved models (and judges' dry runs) as JSON.")
@_errors_to_exit
def preflight_command(candidate: str, judges: tuple[str, ...], skip_dry_run: bool, as_json: bool) -> None:
    """Probe the candidate and each judge, then have each judge grade the calibration set.

    Each model gets one minimal request; the model id each provider returned is printed. Then each judge grades
    the calibration set shipped with the task set (the gold replay agent's and the null agent's answers on a few
    tasks) with the real rubrics and prompt: every reply must parse, gold must be graded correct and null
    incorrect on answer_correctness. The dry run's tokens and latency are printed with a projection of each
    judge's tokens over an official run (every task, 5 epochs).

    Keys and endpoints come from the host environment only: OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL. Exits 1 with one line per problem: a missing key (naming its variable), an unknown
    alias, an endpoint that cannot be reached or refuses the probe, a judge that fails its dry run (naming the
    judge, the dimension and what came back). No request is sent unless every alias is known and has its key.

    Example: ispm preflight --candidate openai/gpt-4.1 --judge anthropic/claude-sonnet-4-6 --judge openai/o3
    """
    from runner.gateway.preflight import preflight
    from runner.grading.judge import LLMJudge
    from runner.grading.rubric import load_rubrics
    from runner.paths import tasks_dir
    from runner.run.spec import V1_EPOCHS
    from runner.run.start import dry_run
    from runner.tasks.load import load_tasks

    roles = ["candidate"] + ["judge"] * len(judges)
    resolved = preflight([candidate, *judges])
    dry_runs = {}
    if judges and not skip_dry_run:
        rubrics = load_rubrics()
        slots = [LLMJudge(j, rubrics=rubrics) for j in dict.fromkeys(judges)]
        planned = len(load_tasks(tasks_dir())) * V1_EPOCHS
        dry_runs = {d.judge: d for d in dry_run(slots, planned, rubrics)}
    if as_json:
        payload = []
        for role, m in zip(roles, resolved, strict=True):
            entry = {"role": role, **m.model_dump(mode="json")}
            if role == "judge" and m.alias in dry_runs:
                entry["dry_run"] = dry_runs[m.alias].model_dump(mode="json")
            payload.append(entry)
        _print_json(payload)
        return
    for role, model in zip(roles, resolved, strict=True):
        returned = model.returned_model or "(the provider returned no model id)"
        click.echo(f"{role:<9}  {model.alias}  ->  {returned}  ({model.latency_s:.2f} s, {model.base_url})")
    for d in dry_runs.values():
        click.echo(d.summary_line())


# --------------------------------------------------------------------------------------- run
@main.command("run")
@click.option("--agent-image", help="The agent image: any tag, or replay / null for the built-in agents.")
@click.option("--candidate", help="The candidate model the agent runs against, provider/model.")
@click.option(
    "--judge", "judges", multiple=True, help="A judge slot: ref / ref#N (offline) or provider/model. Give two."
)
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
    "--backend", type=click.Choice(["docker", "local"]), default="docker", show_default=True, help="Sandbox backend."
)
@click.option("--official", is_flag=True, help="Lock every value to v1 and refuse anything that is not.")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Run folder [runs/<run-id>].")
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Continue the run in this folder with its own spec; nothing already graded is redone.",
)
@_errors_to_exit
def run_command(
    agent_image: str | None,
    candidate: str | None,
    judges: tuple[str, ...],
    epochs: int,
    concurrency: int,
    breaker_after: int,
    task_ids: tuple[str, ...],
    backend: str,
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
    """
    from runner.run.spec import RunSpec
    from runner.run.spec import official as make_official
    from runner.run.start import current_digests, resume_run, run_preflight, start_run

    if resume_dir is not None:
        result = resume_run(resume_dir)
    else:
        if not agent_image:
            raise click.UsageError("--agent-image is required (or --resume RUN_DIR)")
        if len(judges) != 2:
            raise click.UsageError(f"give exactly two --judge options, got {len(judges)}")
        spec = RunSpec(
            agent_image=agent_image,
            candidate=candidate,
            judges=(judges[0], judges[1]),
            epochs=epochs,
            concurrency=concurrency,
            breaker_after=breaker_after,
            tasks=list(task_ids) or None,
            backend=backend,  # type: ignore[arg-type]
        )
        if official:
            spec = make_official(spec, current_digests())
        checked = run_preflight(spec)
        for line in checked.summary_lines():
            click.echo(line)
        result = start_run(spec, run_dir, preflight=checked)
    _print_run_result(result)
    if result.outcome == "stopped":
        raise SystemExit(1)


@main.command("demo")
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
@_errors_to_exit
def demo_command(agent: str, epochs: int, concurrency: int, task_ids: tuple[str, ...], run_dir: Path | None) -> None:
    """Calibrate the harness: every task in Docker with the gold replay (or null) agent and the ref judge.

    No API key is needed. This is a calibration run, never an official one (those are 5 epochs with two
    model judges); it runs 1 epoch unless told otherwise.

    Example: ispm demo --agent null
    """
    from runner.run.calibration import run_calibration

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


# --------------------------------------------------------------------------------------- analytics
@main.command("analytics")
@click.argument("run_dirs", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--query", "query_name", default="leaderboard", show_default=True, help="A named query; --list shows them."
)
@click.option("--sql", help="Your own SQL over the tables runs, dimension_scores, task_grades, samples.")
@click.option("--run-a", help="For --query diff: the first run id.")
@click.option("--run-b", help="For --query diff: the second run id.")
@click.option("--parquet", type=click.Path(file_okay=False, path_type=Path), help="Also export every table here.")
@click.option("--list", "list_queries", is_flag=True, help="List the named queries and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON objects, one per line.")
@_errors_to_exit
def analytics_command(
    run_dirs: tuple[Path, ...],
    query_name: str,
    sql: str | None,
    run_a: str | None,
    run_b: str | None,
    parquet: Path | None,
    list_queries: bool,
    as_json: bool,
) -> None:
    """Answer questions across runs in SQL (DuckDB): leaderboard, breakdowns, run-against-run diffs.

    RUN_DIRS are run folders (or record.json files); default: every folder under runs/.

    Example: ispm analytics runs/* --query diff --run-a RUN1 --run-b RUN2
    """
    from runner.record.store import QUERIES, AnalyticsError, export_parquet, load_summaries, open_store, run_query

    if list_queries:
        for name, text in QUERIES.items():
            click.echo(f"{name}: {' '.join(text.split())}")
        return
    folders = list(run_dirs) or sorted(p for p in Path("runs").glob("*") if (p / "record.json").is_file())
    if not folders:
        raise AnalyticsError("no run folders given and none under runs/")
    conn = open_store(load_summaries(folders))
    if parquet is not None:
        for path in export_parquet(conn, parquet):
            click.echo(f"wrote {path}", err=True)
    if sql is None and query_name not in QUERIES:
        raise AnalyticsError(f"unknown query {query_name!r}; known: {', '.join(QUERIES)}")
    params = {"run_a": run_a or "", "run_b": run_b or ""} if sql is None and query_name == "diff" else None
    columns, rows = run_query(conn, sql or QUERIES[query_name], params)
    if as_json:
        for row in rows:
            click.echo(json.dumps(dict(zip(columns, row, strict=True)), default=str))
        return
    click.echo("\t".join(columns))
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))


# --------------------------------------------------------------------------------------- audit
@main.command("audit")
@click.argument("target", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the audit report as JSON.")
@_errors_to_exit
def audit_command(target: Path, as_json: bool) -> None:
    """Recompute every number of a run folder or bundle from its raw journal; exit 1 naming every difference.

    Example: ispm audit runs/<run-id>
    """
    from runner.record.audit import audit

    report = audit(target)
    log.get(__name__).info("run.audited", source=str(target), ok=report.ok, problems=report.problems)
    if as_json:
        _print_json(report)
    else:
        for note in report.notes:
            click.echo(f"note: {note}")
        checked = ", ".join(f"{name} {count}" for name, count in sorted(report.checks.items()))
        if report.ok:
            click.echo(f"ok: run {report.run_id} recomputes exactly ({checked})")
        else:
            for problem in report.problems:
                click.echo(f"  - {problem}", err=True)
            click.echo(f"FAILED: {len(report.problems)} problem(s) in {target}", err=True)
    if not report.ok:
        raise SystemExit(1)


@main.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page (default: report.html beside the run's record.json).",
)
@_errors_to_exit
def report_command(run_dir: Path, out: Path | None) -> None:
    """Write a run's report: one self-contained HTML page (summary with CIs, charts, every task and vote).

    Example: ispm report runs/<run-id> --out /tmp/report.html
    """
    from runner.record.report import write_report

    path = write_report(run_dir, out=out)
    log.get(__name__).info("run.reported", run_dir=str(run_dir), report=str(path))
    click.echo(str(path))


@main.command("leaderboard")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("leaderboard.html"),
    show_default=True,
    help="Where to write the page.",
)
@_errors_to_exit
def leaderboard_command(run_dirs: tuple[Path, ...], out: Path) -> None:
    """Rank runs on one self-contained HTML page; runs without a score and calibrations are listed, unranked.

    RUN_DIRS are run folders (or their record.json files).

    Example: ispm leaderboard runs/* --out leaderboard.html
    """
    from runner.record.leaderboard import write_leaderboard

    path, rows = write_leaderboard(list(run_dirs), out)
    ranked = sum(r.rank is not None for r in rows)
    log.get(__name__).info("runs.leaderboard", runs=len(rows), ranked=ranked, out=str(path))
    click.echo(f"{path}: {len(rows)} runs, {ranked} ranked")


@main.command("bundle")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the archive (default: <run-id>.tar.gz beside the run folder).",
)
@_errors_to_exit
def bundle_command(run_dir: Path, out: Path | None) -> None:
    """Write a run folder as one deterministic tar.gz with a sha256 for every file in MANIFEST.json.

    Example: ispm bundle runs/<run-id> -o submission.tar.gz
    """
    from runner.record.bundle import bundle, default_bundle_path

    path = bundle(run_dir, out or default_bundle_path(run_dir))
    log.get(__name__).info("run.bundled", run_dir=str(run_dir), bundle=str(path))
    click.echo(str(path))


# --------------------------------------------------------------------------------------- schema
@main.group()
def schema() -> None:
    """Print the JSON Schema of a contract file.

    Example: ispm schema answer
    """


@schema.command("answer")
def schema_answer() -> None:
    """Print the JSON Schema of /output/answer.json (ispm.answer/v1), for people who bring their own agent.

    Example: ispm schema answer > answer.schema.json
    """
    from runner.contract import Answer

    click.echo(json.dumps(Answer.model_json_schema(), indent=2, sort_keys=True))


@schema.command("run-record")
def schema_run_record() -> None:
    """Print the JSON Schema of a run's record.json (the public run record).

    Example: ispm schema run-record > run-record.schema.json
    """
    from runner.record.model import RunRecord

    click.echo(json.dumps(RunRecord.model_json_schema(), indent=2, sort_keys=True))
