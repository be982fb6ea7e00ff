#!/usr/bin/python3
"""The null agent (ispm.agent/v1): writes an answer with nothing in it and exits 0.

It is the floor of every calibration: it must score zero, and its run time is the sandbox's
own overhead. It reads nothing. The output folder is /output, or $ISPM_OUTPUT_DIR for the
local backend.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

EMPTY_ANSWER: dict[str, object] = {"response": "", "verdict": None, "evidence": [], "queries": []}


def main() -> int:
    """Write the empty answer to <output>/answer.json."""
    output = Path(os.environ.get("ISPM_OUTPUT_DIR", "/output"))
    (output / "answer.json").write_text(json.dumps(EMPTY_ANSWER) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
