"""``ispm_enterprise_sql``: the 127 tasks of v1 as one Inspect task.

    inspect eval runner/ispm_enterprise_sql --model openai/gpt-4.1 \\
        --model-role judge_a=anthropic/claude-sonnet-4-6 --model-role judge_b=openai/gpt-4.1

Each sample is one task: its input the task's prompt, its metadata the task id (which the ``ispm`` sandbox
mounts as ``/task``), vendors, kind, category and hops. Five epochs by default, reduced by ``ispm_consensus``;
15 minutes per sample. The default solver is Inspect's ``react`` agent with ``sql``, ``schema_docs`` and our
``submit``; ``--solver`` swaps in any other, which answers by writing ``/output/answer.json`` (the agent
contract) or by calling :func:`runner.inspect_eval.tools.submit`.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspect_ai import Epochs, Task, task
from inspect_ai.agent import AgentSubmit, react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.solver import Solver
from inspect_ai.util import SandboxEnvironmentSpec

from runner.inspect_eval.names import registered
from runner.inspect_eval.reducer import ispm_consensus
from runner.inspect_eval.sandbox import TASK_METADATA_KEY, IspmSandboxConfig
from runner.inspect_eval.scorer import ispm_scorer
from runner.inspect_eval.task_set import tasks
from runner.inspect_eval.tools import schema_docs, sql, submit
from runner.inspect_names import TASK
from runner.run.spec import V1_EPOCHS, V1_SAMPLE_LIMIT_S
from runner.tasks.model import Task as IspmTask

EPOCHS = V1_EPOCHS
"""The epochs of an official run of v1."""
TIME_LIMIT_S = int(V1_SAMPLE_LIMIT_S)
"""Per sample, as in v1."""

INSTRUCTIONS = """\
You are an identity-security analyst investigating a frozen snapshot of one company's identity and access estate: \
HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub and MongoDB Atlas, in one read-only SQLite database whose \
tables carry each vendor's prefix (okta_, aws_, ...). Read the schema documentation (schema_docs, the overview \
first) before you rely on what a column means; it also says which moment counts as "now".

No key crosses vendors: to follow a person from one system to another, match on emails, aliases, logins, names or \
provisioning links, and mind case and older email domains.

Query with the sql tool (one read-only statement per call; results are capped, so filter and aggregate). Base every \
claim on query results. When you are done, call submit exactly once with: response (the conclusion first, then an \
explanation a reviewer can check), verdict ("yes" or "no" for a yes/no question, null when the question asks for a \
list), evidence (one item per cited person, account, group, role, resource, policy or configuration fact, with its \
vendor, kind, the vendor's own identifier and the fact that makes it relevant), and queries (the SQL your conclusion \
rests on, verbatim)."""


def _names(value: str | Sequence[str] | None) -> list[str] | None:
    # `-T task_ids=ispm-001,ispm-002` arrives as one string; a list from Python or YAML as a list.
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [item.strip() for item in items if item.strip()]


def select(task_ids: Sequence[str] | None = None, vendor: str | None = None, kind: str | None = None) -> list[IspmTask]:
    """The tasks of v1 that match every filter given, in the task set's order.

    Raises:
        ValueError: an unknown task id, or filters that leave no task.
    """
    every = tasks()
    if task_ids is not None:
        unknown = [t for t in task_ids if t not in every]
        if unknown:
            raise ValueError(f"no such task: {', '.join(unknown)}")
    chosen = [
        t
        for t in every.values()
        if (task_ids is None or t.id in task_ids)
        and (vendor is None or vendor in t.vendors)
        and (kind is None or t.kind == kind)
    ]
    if not chosen:
        raise ValueError(f"no task matches task_ids={task_ids}, vendor={vendor!r}, kind={kind!r}")
    return chosen


def sample_of(t: IspmTask) -> Sample:
    """One task as a sample: the prompt the agent sees, and the metadata the sandbox and the scorer read."""
    return Sample(
        id=t.id,
        input=t.prompt.strip(),
        metadata={
            TASK_METADATA_KEY: t.id,
            "kind": t.kind,
            "vendors": list(t.vendors),
            "category": t.category,
            "hops": t.hops,
        },
    )


def default_solver() -> Solver:
    """Inspect's ``react`` agent with the ``sql`` and ``schema_docs`` tools and our ``submit``."""
    agent = react(
        prompt=INSTRUCTIONS,
        tools=[sql(), schema_docs()],
        submit=AgentSubmit(name="submit", tool=submit(), answer_only=True),
    )
    return agent  # type: ignore[return-value]  # an Agent is accepted wherever a Solver is


@task(name=registered(TASK))
def ispm_enterprise_sql(
    task_ids: str | list[str] | None = None,
    vendor: str | None = None,
    kind: str | None = None,
    judges: str | list[str] = "judge_a,judge_b",  # judges.DEFAULT_JUDGES, as Inspect shows a default
    epochs: int = EPOCHS,
    time_limit: int = TIME_LIMIT_S,
    image: str | None = None,
    solver: Solver | None = None,
) -> Task:
    """ISPM-Enterprise-SQL@v1 in Inspect (never an official run).

    Args:
        task_ids: Only these tasks (``ispm-001,ispm-002``).
        vendor: Only tasks that involve this vendor (hibob, okta, azure, aws, gcp, gws, github, atlas).
        kind: Only ``verdict`` or ``enumeration`` tasks.
        judges: The two judge slots: model roles (bound with ``--model-role``), or ``ref`` and ``ref#2``, the
            offline reference judge.
        epochs: Epochs per task, reduced by ``ispm_consensus``.
        time_limit: Seconds per sample.
        image: The sandbox's image (default: our base image).
        solver: Any other solver or agent in place of ``react``.
    """
    slots = _names(judges) or []
    return Task(
        dataset=MemoryDataset([sample_of(t) for t in select(_names(task_ids), vendor, kind)], name="ispm-v1"),
        solver=solver or default_solver(),
        scorer=ispm_scorer(slots),
        epochs=Epochs(epochs, ispm_consensus()),
        sandbox=SandboxEnvironmentSpec("ispm", IspmSandboxConfig(image=image)),
        time_limit=time_limit,
        version="ispm-enterprise-sql@v1",
    )
