"""Solvers and agents for tests/test_inspect_task.py.

``gold_replay`` replays a task's gold answer through the task's own ``sql`` and ``submit`` tools, in the sample's
sandbox, without asking the model anything (for the command-line test).

mockllm's default reply has no token usage, and mockllm then counts tokens with tiktoken, whose encoding Inspect
downloads on first use; this machine has no network beyond the package registries, so the command line cannot
script the model's replies (the in-process tests script them with usage given)."""

from __future__ import annotations

from inspect_ai.agent import Agent, AgentState, agent, sandbox_agent_bridge
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sandbox

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


@agent
def bridged_openai_agents(time_budget_s: int = 120) -> Agent:
    """Our OpenAI Agents SDK agent image, run unchanged in the ispm sandbox behind Inspect's agent bridge: its
    Responses calls go to the bridge's proxy in the sandbox, and from there to the eval's model."""

    async def execute(state: AgentState) -> AgentState:
        async with sandbox_agent_bridge(state) as bridge:
            env = {
                "OPENAI_BASE_URL": f"http://localhost:{bridge.port}/v1",
                "OPENAI_API_KEY": "bridged",
                "ISPM_MODEL": "inspect",
                "ISPM_TIME_BUDGET_S": str(time_budget_s),
            }
            done = await sandbox().exec(["/usr/bin/python3", "-I", "/opt/ispm/agent.py"], env=env)
            if not done.success:
                raise RuntimeError(f"the bridged agent failed ({done.returncode}): {done.stderr[-2000:]}")
        return bridge.state

    return execute


@solver
def planted_symlink() -> Solver:
    """A hostile agent: its answer is a symlink to a file outside /output."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        done = await sandbox().exec(["ln", "-s", "/task/task.json", "/output/answer.json"])
        if not done.success:
            raise RuntimeError(done.stderr)
        return state

    return solve
