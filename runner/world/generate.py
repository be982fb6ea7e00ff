"""Generate the whole enterprise in memory: vendors run in ``ORDER``, each handed the typed values
(``Generated.published``) that the earlier vendors it reads from published."""

from __future__ import annotations

import random
from types import ModuleType

from runner.world import traps
from runner.world.org import Org, Row, Rows
from runner.world.schema import Table
from runner.world.tables import VENDOR_TABLES, checked
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
    return tuple(t for vendor in ORDER for t in tables_of(vendor))


def tables_of(vendor: ModuleType) -> tuple[Table, ...]:
    """The table specs of one vendor module of ``ORDER``."""
    return VENDOR_TABLES[vendor.__name__.rsplit(".", 1)[1]]


def vendor_of(table: str) -> str:
    """The vendor prefix (``okta``, ``aws`` …) of a table name."""
    prefix = table.split("_", 1)[0]
    if prefix not in VENDOR_PREFIXES:
        raise ValueError(f"table {table!r} has no known vendor prefix")
    return prefix


def generate(seed: int = SEED) -> dict[str, list[Row]]:
    """All rows of all tables, keyed by table name, each checked against its table's declaration."""
    org = Org(rng=random.Random(seed))
    rows: dict[str, list[Row]] = {}
    specs = {t.name: t for t in all_tables()}

    def keep(vendor: ModuleType, produced: Rows) -> None:
        declared = {t.name for t in tables_of(vendor)}
        if set(produced) != declared:
            raise RuntimeError(f"{vendor.__name__}: produced {sorted(produced)} but declares {sorted(declared)}")
        for name, table_rows in produced.items():
            rows[name] = checked(specs[name], table_rows)

    # The same order as ``ORDER``: each call draws from ``org.rng`` in turn, so the order is the seed's.
    keep(hibob, hibob.generate(org))
    okta_out = okta.generate(org)
    keep(okta, okta_out.rows)
    azure_out = azure.generate(org)
    keep(azure, azure_out.rows)
    gws_out = gws.generate(org)
    keep(gws, gws_out.rows)
    keep(aws, aws.generate(org, okta_out.published))
    keep(gcp, gcp.generate(org, gws_out.published))
    keep(github, github.generate(org, okta_out.published))
    keep(atlas, atlas.generate(org))
    # The trap plantings come last, from their own generator, so the vendors' rows stay as they were.
    for name, table_rows in traps.plant(org, rows, seed, azure_out.published).items():
        rows[name] = rows[name] + checked(specs[name], table_rows)
    return rows
