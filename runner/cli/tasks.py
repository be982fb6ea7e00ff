"""The ``ispm tasks`` commands: list, show, check, derive and verify the task set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from runner.cli.output import json_option, print_json
from runner.errors import TaskError
from runner.paths import tasks_dir, world_dir


@click.group()
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
@json_option("Print the tasks as JSON: the agent-visible fields and the trap families.")
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
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.tasks.catalog import TaskFilter, catalog

    chosen = [
        t
        for t in catalog().tasks
        if TaskFilter(vendor=vendor, kind=kind, category=category, difficulty=difficulty, hops=hops).matches(t)
    ]
    if as_json:
        print_json(
            [
                {
                    **t.model_dump(
                        mode="json", include={"id", "title", "kind", "category", "vendors", "hops", "difficulty"}
                    ),
                    "traps": t.trap_families,
                }
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
@json_option("Print as JSON.")
def tasks_show(task_id: str, with_truth: bool, as_json: bool) -> None:
    """Show exactly the files a container gets for TASK_ID (/task/prompt.md, /task/task.json).

    Example: ispm tasks show ispm-001 --with-truth
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.tasks.catalog import catalog
    from runner.tasks.view import agent_files

    by_id = catalog().by_id
    if task_id not in by_id:
        raise TaskError(f"no such task: {task_id}")
    task = by_id[task_id]
    files = agent_files(task)
    host: dict[str, Any] = {}
    if with_truth:
        truth = catalog().truths.get(task_id)
        host = {
            "witness_sql": task.witness_sql,
            "dual_sql": task.dual_sql,
            "entity_columns": [e.model_dump() for e in task.entity_columns],
            "ground_truth": truth.model_dump(mode="json") if truth else None,
        }
    if as_json:
        print_json({"agent_files": files, **({"host": host} if with_truth else {})})
        return
    for name, text in files.items():
        click.echo(f"==> /task/{name} <==\n{text}")
    if with_truth:
        click.echo("==> host only: witness SQL <==\n" + task.witness_sql.strip() + "\n")
        click.echo("==> host only: ground truth <==\n" + json.dumps(host["ground_truth"], indent=2))


@tasks.command("check")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
def tasks_check(paths: tuple[Path, ...]) -> None:
    """Validate task files and run both witnesses, without writing anything (for task authors).

    Example: ispm tasks check tasks/v1/ispm-001.yaml
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
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
def tasks_derive() -> None:
    """Derive the ground truth of every task from the world and write tasks/ground_truth.json.

    Example: ispm tasks derive
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.tasks.catalog import derive_all
    from runner.tasks.truth import GROUND_TRUTH_NAME, write_ground_truth

    truth = derive_all(tasks_dir(), world_dir())
    write_ground_truth(tasks_dir() / GROUND_TRUTH_NAME, truth)
    click.echo(
        f"derived {len(truth.tasks)} tasks; task set {truth.task_set_digest[:16]}…, "
        f"ground truth {truth.ground_truth_digest[:16]}…"
    )


@tasks.command("verify")
@json_option("Print the task mix as JSON on success.")
def tasks_verify(as_json: bool) -> None:
    """Re-derive all ground truth from the world; exit 1 naming every task that differs.

    Example: ispm tasks verify
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.tasks.catalog import catalog, mix, verify_all

    truth = verify_all(tasks_dir(), world_dir())
    summary = mix(catalog().tasks, truth)
    if as_json:
        print_json(summary)
        return
    click.echo(
        f"ok: {summary.total} tasks match the world; {summary.verdict} verdict "
        f"({summary.verdict_yes} yes), {summary.multi_vendor} multi-vendor, {summary.three_hop} three-hop"
    )
