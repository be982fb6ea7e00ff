"""A summary of the world for humans and scripts: vendors, tables and row counts."""

from __future__ import annotations

from pydantic import BaseModel

from runner.world.generate import VENDOR_PREFIXES
from runner.world.manifest import WorldManifest


class VendorSummary(BaseModel):
    """One vendor's tables and row counts."""

    vendor: str
    prefix: str
    tables: dict[str, int]


class WorldSummary(BaseModel):
    """What ``ispm world info`` prints."""

    dataset: str
    revision: str
    as_of: str
    publish_date: str
    logical_digest: str
    snapshot_sha256: str
    snapshot_bytes: int
    vendors: list[VendorSummary]


def summarize(manifest: WorldManifest) -> WorldSummary:
    """Group the manifest's tables by vendor, in the docs' vendor order."""
    vendors = []
    for prefix, name in VENDOR_PREFIXES.items():
        tables = {t: e.rows for t, e in sorted(manifest.tables.items()) if e.vendor == prefix}
        vendors.append(VendorSummary(vendor=name, prefix=prefix, tables=tables))
    return WorldSummary(
        dataset=manifest.dataset,
        revision=manifest.revision,
        as_of=manifest.as_of,
        publish_date=manifest.publish_date,
        logical_digest=manifest.logical_digest,
        snapshot_sha256=manifest.snapshot.sha256,
        snapshot_bytes=manifest.snapshot.bytes,
        vendors=vendors,
    )
