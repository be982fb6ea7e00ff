"""Judge slots as a user names them, read one way by every command (``ispm run``, ``grade``, ``preflight``) and by
every run: ``ref`` or ``ref#N`` is the offline reference judge, anything else a ``provider/model`` judge.

Slots only: importing this module loads no judge and no HTTP client (the run spec reads it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

REFERENCE_ALIAS: Final = "ref"
"""The offline reference judge's alias; ``ref#N`` names more slots of it (two slots need distinct aliases)."""


def is_reference(alias: str) -> bool:
    """Whether the slot ``alias`` is the offline reference judge: ``ref`` or ``ref#N``."""
    return alias == REFERENCE_ALIAS or alias.startswith(REFERENCE_ALIAS + "#")


def slots_problem(aliases: Sequence[str]) -> str | None:
    """Why ``aliases`` cannot be a command's judge slots (two slots with one alias would make their votes
    indistinguishable in consensus); ``None`` when they can."""
    if len(set(aliases)) == len(aliases):
        return None
    slots = "the two judge slots" if len(aliases) == 2 else "judge slots"
    return f"{slots} need distinct aliases (use ref#1 and ref#2), got {list(aliases)}"
