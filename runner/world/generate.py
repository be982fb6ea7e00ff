"""Generate the whole enterprise in memory: vendors run in ``ORDER``, each reading what earlier
vendors published on the shared ``Org``."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from types import ModuleType

from runner.world import traps
from runner.world.org import Org, Row, Rows
from runner.world.schema import Table
from runner.world.vendors import atlas, aws, azure, gcp, github, gws, hibob, okta

GENERATOR_VERSION = "1.0.0"
SEED = 20260630

# HR first (everyone derives from people), then the IdPs, then the systems they feed.
ORDER: tuple[ModuleType, ...] = (hibob, okta, azure, gws, aws, gcp, github, atlas)
VENDOR_PREFIXES = {
    "hibob": "HiBob",
    "okta": "Okta",
    "azure": "Azure AD",
    "aws": "AWS",
    "gcp": "GCP",
    "gws": "Google Workspace",
    "github": "GitHub",
    "atlas": "MongoDB Atlas",
}


def all_tables() -> tuple[Table, ...]:
    """Every table spec of every vendor, in generation order."""
    return tuple(t for vendor in ORDER for t in vendor.TABLES)


def vendor_of(table: str) -> str:
    """The vendor prefix (``okta``, ``aws`` …) of a table name."""
    prefix = table.split("_", 1)[0]
    if prefix not in VENDOR_PREFIXES:
        raise ValueError(f"table {table!r} has no known vendor prefix")
    return prefix


def generate(seed: int = SEED) -> dict[str, list[Row]]:
    """All rows of all tables, keyed by table name, after checking them against the specs."""
    org = Org(rng=random.Random(seed))
    rows: dict[str, list[Row]] = {}
    specs = {t.name: t for t in all_tables()}
    for vendor in ORDER:
        produce: Callable[[Org], Rows] = vendor.generate
        produced = produce(org)
        declared = {t.name for t in vendor.TABLES}
        if set(produced) != declared:
            raise RuntimeError(f"{vendor.__name__}: produced {sorted(produced)} but declares {sorted(declared)}")
        for name, table_rows in produced.items():
            rows[name] = _checked(specs[name], table_rows)
    # The trap plantings come last, from their own generator, so the vendors' rows stay as they were.
    for name, table_rows in traps.plant(org, rows, seed).items():
        rows[name] = rows[name] + _checked(specs[name], table_rows)
    return rows


def _checked(spec: Table, table_rows: Sequence[Row]) -> list[Row]:
    width = len(spec.columns)
    for row in table_rows:
        if len(row) != width:
            raise RuntimeError(f"{spec.name}: row has {len(row)} values, table has {width} columns: {row!r}")
    return [tuple(r) for r in table_rows]
