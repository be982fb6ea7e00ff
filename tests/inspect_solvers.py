"""A scripted Inspect solver for the command-line test (tests/test_inspect_task.py): it replays a task's gold answer
through the task's own ``sql`` and ``submit`` tools, in the sample's sandbox, without asking the model anything.

mockllm's default reply has no token usage, and mockllm then counts tokens with tiktoken, whose encoding Inspect
downloads on first use; this machine has no network beyond the package registries, so the command line cannot
script the model's replies (the in-process tests script them with usage given)."""

from __future__ import annotations

from inspect_ai.solver import Generate, Solver, TaskState, solver

from runner.grading.reference_judge import gold_answer
from runner.inspect_eval.task_set import task_by_id, truths
from runner.inspect_eval.tools import sql, submit


@solver
def gold_replay() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        task_id = str(state.metadata["task_id"])
        task = task_by_id(task_id)
        await sql()(query=task.witness_sql)
        answer = gold_answer(task, truths()[task_id]).model_dump(mode="json", exclude={"format"})
        state.output.completion = str(await submit()(**answer))
        return state

    return solve
