"""The task list's filters: parsing the query parameters (bounded) and matching tasks. Pure.

The browser's filter (``templates/tasks.html.j2``) applies the same rules to the same ``data-*`` values, so a
static site and the board show the same tasks for the same query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runner.site.model import TaskQuery
from runner.tasks.model import CATEGORIES, TRAP_FAMILIES, VENDORS, Task

MAX_QUERY_CHARS = 200
"""The longest search text looked at; a longer one is refused with an empty result that says so."""
MAX_VALUE_CHARS = 64
"""The longest filter value looked at; no real one comes near it."""
NO_TRAP = "none"
"""The ``trap`` value of tasks that set no trap."""
AXES: tuple[str, ...] = ("vendor", "kind", "category", "hops", "difficulty", "trap")
"""The filters, in the form's order (the text search ``q`` comes after them)."""


def filter_options(tasks: Sequence[Task]) -> dict[str, tuple[str, ...]]:
    """Every value each filter may take: the declared ones, in declaration order (what no task has stays listed)."""
    hops = sorted({t.hops for t in tasks})
    return {
        "vendor": VENDORS,
        "kind": ("verdict", "enumeration"),
        "category": CATEGORIES,
        "hops": tuple(str(h) for h in hops),
        "difficulty": ("easy", "medium", "hard", "expert"),
        "trap": (*TRAP_FAMILIES, NO_TRAP),
    }


def parse_query(params: Mapping[str, str]) -> tuple[TaskQuery, list[str]]:
    """The filters from query parameters, and why any value is refused (one line each).

    Unknown parameters are ignored. A value longer than the bound is dropped (kept as an empty filter) and named in
    the problems, cut short so that the page never echoes much of it.
    """
    values: dict[str, str] = {}
    problems = []
    for axis in (*AXES, "q"):
        raw = params.get(axis, "")
        bound = MAX_QUERY_CHARS if axis == "q" else MAX_VALUE_CHARS
        if len(raw) > bound:
            problems.append(f"{axis}: longer than {bound} characters ({raw[:40]}…); nothing can match it")
            values[axis] = raw[:bound]
            continue
        # Control characters (a NUL, a bidi override) never match a task and would only be echoed: spaces instead.
        values[axis] = "".join(ch if ch.isprintable() else " " for ch in raw).strip()
    return TaskQuery(**values), problems


def unknown_values(query: TaskQuery, options: Mapping[str, Sequence[str]]) -> list[str]:
    """Each filter value that names nothing the filter knows, as a sentence for the empty result."""
    return [
        f"{axis}: no task has the value {getattr(query, axis)!r} (one of: {', '.join(options[axis])})"
        for axis in AXES
        if getattr(query, axis) and getattr(query, axis) not in options[axis]
    ]


def search_text(task: Task) -> str:
    """What the text search looks in: the id, the title and the prompt, folded to lower case."""
    return f"{task.id}\n{task.title}\n{task.prompt}".casefold()


def matches(task: Task, query: TaskQuery) -> bool:
    """Whether ``task`` passes every filter set in ``query`` (an empty filter passes everything)."""
    traps = task.trap_families or [NO_TRAP]
    checks = (
        (query.vendor, list(task.vendors)),
        (query.kind, [task.kind]),
        (query.category, [task.category]),
        (query.hops, [str(task.hops)]),
        (query.difficulty, [task.difficulty]),
        (query.trap, traps),
    )
    if any(wanted and wanted not in have for wanted, have in checks):
        return False
    text = search_text(task)
    return all(word in text for word in query.q.casefold().split())


def select_tasks(tasks: Sequence[Task], query: TaskQuery) -> list[Task]:
    """The tasks that pass every filter, in the order given."""
    return [t for t in tasks if matches(t, query)]
