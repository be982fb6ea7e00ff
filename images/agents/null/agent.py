#!/usr/bin/python3
"""The null agent (ispm.agent/v1): writes an answer with nothing in it and exits 0.

It is the floor of every calibration: it must score zero, and its run time is the sandbox's
own overhead. It reads nothing. The output folder is /output, or $ISPM_OUTPUT_DIR for the
local backend.

It imports nothing but ``os`` and ``sys`` (frozen and built in): ``json`` and ``pathlib`` took 25 ms of a 45 ms
start in the container, time that would be counted as the sandbox's when the null agent
measures it (docs/sandbox.md, "What a sample and a run cost").
"""

import os
import sys

# json.dumps({"response": "", "verdict": None, "evidence": [], "queries": []}) and a newline.
EMPTY_ANSWER = b'{"response": "", "verdict": null, "evidence": [], "queries": []}\n'


def main() -> int:
    """Write the empty answer to <output>/answer.json."""
    path = os.path.join(os.environ.get("ISPM_OUTPUT_DIR", "/output"), "answer.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = memoryview(EMPTY_ANSWER)
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
