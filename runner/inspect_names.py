"""The names ISPM-Enterprise-SQL@v1 has in Inspect AI, and its score scheme there: one place for ``inspect eval``
(:mod:`runner.inspect_eval`, which registers them) and ``ispm export --format inspect`` (:mod:`runner.trace`, which
writes them into a log without Inspect), so that both logs of the same tasks are one task in ``inspect view``.

The names are Inspect's registry names as ``inspect eval`` shows them: ``runner/<name>``, the prefix being our
``inspect_ai`` entry point. A score is a dict of the graded dimensions, each its consensus as
:func:`runner.grading.grades.score` gives it (1.0, 0.5, 0.0), or ``None`` where the consensus abstained. Plain
strings only: the exporter must not load Inspect.
"""

from __future__ import annotations

from typing import Final

PACKAGE: Final = "runner"
"""The registry prefix, and the name of our ``inspect_ai`` entry point."""
TASK: Final = "ispm_enterprise_sql"
"""The task (``inspect eval runner/ispm_enterprise_sql``)."""
SCORER: Final = "ispm_scorer"
"""The scorer; a sample's score is logged under this name, unprefixed, as Inspect logs it."""
REDUCER: Final = "ispm_consensus"
"""The epoch reducer: the v1 consensus across epochs."""
METRIC: Final = "scored_mean"
"""Each dimension's metric: the mean of the scored values, abstentions left out; logged unprefixed."""


def qualified(name: str) -> str:
    """``name`` as the registry and a log's task, reducer and config name it: ``runner/<name>``."""
    return f"{PACKAGE}/{name}"
