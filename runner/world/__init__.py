"""The world stage: the frozen ``ispm-crossvendor-v1`` snapshot, its manifest, digests and docs."""

DATASET_ID = "ispm-crossvendor-v1"
SNAPSHOT_NAME = f"{DATASET_ID}.sqlite"
MANIFEST_NAME = "manifest.json"
DOCS_DIR = "docs"
