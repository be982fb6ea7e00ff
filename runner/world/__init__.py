"""The world stage: the frozen ``ispm-crossvendor-v1`` snapshot, its manifest, digests and docs."""

from typing import Final

DATASET_ID: Final = "ispm-crossvendor-v1"
SNAPSHOT_NAME = f"{DATASET_ID}.sqlite"
MANIFEST_NAME = "manifest.json"
DOCS_DIR = "docs"
