"""The two test lanes: ``make check`` runs every test that needs no Docker, browser, PostgreSQL or Ray; ``make test``
runs them all, as CI does.

A test declares the parts it needs with the markers ``docker``, ``browser``, ``postgres`` and ``ray``. The check lane
deselects those and sets ``ISPM_TEST_LANE=check`` with ``DOCKER_HOST`` pointing nowhere, so a test that reaches for a
part it did not declare fails there, naming the marker it lacks, instead of slowing the fast lane down unnoticed.
"""

from __future__ import annotations

import os

import pytest

LANE_VARIABLE = "ISPM_TEST_LANE"


def needs(part: str, marker: str) -> None:
    """Fail, naming ``marker``, when a test in the check lane reaches for ``part``."""
    if os.environ.get(LANE_VARIABLE) == "check":
        pytest.fail(f"this test starts {part} but is not marked `{marker}`: `make check` runs without {part}")


PARTS = ("docker", "browser", "postgres", "ray")
"""The markers of the parts ``make check`` runs without."""


def heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order the session so the files that take longest start first, each file's tests still together.

    ``make test`` hands whole files to its workers in this order (``--dist loadfile --no-loadscope-reorder``): a
    file with a ``slow`` test first, then one that needs a part, then the rest, which fill the gaps while the first
    wait on the engine. The order is a pure function of the collection, so every worker collects the same one.
    """

    def weight(item: pytest.Item) -> int:
        if item.get_closest_marker("slow") is not None:
            return 2
        return 1 if any(item.get_closest_marker(part) is not None for part in PARTS) else 0

    heaviest: dict[str, int] = {}
    for item in items:
        heaviest[str(item.path)] = max(heaviest.get(str(item.path), 0), weight(item))
    items.sort(key=lambda item: -heaviest[str(item.path)])  # stable: a file's tests keep their order
