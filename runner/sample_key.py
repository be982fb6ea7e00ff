"""Which sample: one task in one epoch of a run. The one way every stage names a sample.

A key orders as ``(task_id, epoch)`` does and is spelled ``<task>.e<epoch>`` (:meth:`SampleKey.label`) wherever a
sample is named in text: logs, file names, the gateway's sample id, container labels. This module imports nothing of
the project: every stage may use it.
"""

from __future__ import annotations

import re
from functools import total_ordering

from pydantic import BaseModel, ConfigDict

_LABEL = re.compile(r"^(?P<task>.+)\.e(?P<epoch>[1-9][0-9]{0,5})$")


@total_ordering
class SampleKey(BaseModel):
    """Which sample: a task and an epoch of one run."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")

    task_id: str
    """The task's id."""
    epoch: int
    """The epoch, from 1."""

    def label(self) -> str:
        """``<task>.e<epoch>``, as logs and file names spell it."""
        return f"{self.task_id}.e{self.epoch}"

    @classmethod
    def parse(cls, label: str) -> SampleKey:
        """The key a :meth:`label` spells.

        Raises:
            ValueError: ``label`` is not ``<task>.e<epoch>``.
        """
        found = _LABEL.match(label)
        if found is None:
            raise ValueError(f"{label[:200]!r} names no sample: expected <task>.e<epoch>")
        return cls(task_id=found["task"], epoch=int(found["epoch"]))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SampleKey):
            return NotImplemented
        return (self.task_id, self.epoch) < (other.task_id, other.epoch)

    def __hash__(self) -> int:
        # The same as the tuple's: cheap, and a key hashed in a set or dict of millions of votes costs no more.
        return hash((self.task_id, self.epoch))

    def __str__(self) -> str:
        return self.label()
