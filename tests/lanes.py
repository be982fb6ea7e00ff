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
