"""``ispm audit`` and ``ispm verify`` read a bundle as a stream: a member the manifest does not list, or one over its
size cap, is refused from its header before a byte of it is read, and every member is hashed on its way to disk,
never held in memory. The run inside is the v1 fixture run, bundled."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.record import bundle as bundle_format
from runner.record.audit import audit
from runner.record.bundle import MANIFEST_NAME, bundle, read_member
from runner.record.model import RECORD_NAME

RUN = Path(__file__).resolve().parent / "fixtures" / "v1_runs" / "anthropic"
FOUR_GIB = 4 * 1024**3


class Zeros:
    """A file of ``size`` zero bytes that exists nowhere: what a generated member is read from."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "fixture-run"
    shutil.copytree(RUN, run_dir)
    return bundle(run_dir, run_dir.parent / "fixture-run.tar.gz")


def _with_extra_member(clean: Path, target: Path, name: str, size: int) -> Path:
    """``clean`` with one more member of ``size`` zeros at its end, gzip level 1 as a bundle bomb would be."""
    with (
        tarfile.open(clean, "r:gz") as src,
        gzip.GzipFile(target, "wb", compresslevel=1) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as dst,
    ):
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member))
        extra = tarfile.TarInfo(name)
        extra.size = size
        dst.addfile(extra, Zeros(size))  # type: ignore[arg-type]
    return target


def _members(path: Path) -> Iterator[str]:
    with tarfile.open(path, "r|gz") as tar:
        for member in tar:
            yield member.name


def test_a_clean_bundle_streams_through_the_audit(clean_bundle: Path) -> None:
    report = audit(clean_bundle)
    assert report.problems == [] and report.checks["bundle_files"] == len(list(_members(clean_bundle))) - 1
    assert json.loads(read_member(clean_bundle, RECORD_NAME) or b"null")["run_id"] == report.run_id


def test_a_4_gib_member_not_in_the_manifest_is_refused_unread_with_little_memory(
    clean_bundle: Path, tmp_path: Path
) -> None:
    bomb = _with_extra_member(clean_bundle, tmp_path / "bomb.tar.gz", "fixture-run/zeros.bin", FOUR_GIB)
    assert bomb.stat().st_size < 64 * 1024**2  # the bomb is small; what it unpacks to is not
    # The audit in a process of its own, so its peak memory is its own. Its address space is capped at 2 GiB: an
    # auditor that read the member whole would fail here rather than take 4 GiB from a shared machine.
    program = (
        "import json, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))\n"
        "from runner.record.audit import audit\n"
        "report = audit(__import__('pathlib').Path(sys.argv[1]))\n"
        # VmHWM is this program's own peak since exec; ru_maxrss would also count the forked copy of the test's
        # process (an xdist worker hundreds of MiB large) before the exec.
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(json.dumps({'problems': report.problems, 'notes': report.notes, 'peak_kib': int(hwm)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", program, str(bomb)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["problems"] == [
        f"bundle: zeros.bin is in the archive but not listed in {MANIFEST_NAME}: refused unread ({FOUR_GIB} bytes); "
        "the archive was not read further"
    ]
    assert found["notes"] == ["the run inside the bundle was not audited: the bundle was refused"]
    peak_mib = found["peak_kib"] / 1024
    assert peak_mib < 400, peak_mib
    print(f"audit of the 4 GiB bomb ({bomb.stat().st_size} bytes): peak {peak_mib:.0f} MiB")


def test_a_listed_member_over_its_cap_is_refused_unread(
    clean_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A transcript part listed in the manifest but larger than any file may be: refused from its header.
    monkeypatch.setattr(bundle_format, "MAX_FILE_BYTES", 1024)
    with tarfile.open(clean_bundle, "r:gz") as tar:
        manifest = json.loads(tar.extractfile(MANIFEST_NAME).read())  # type: ignore[union-attr]
    big = next(name for name in manifest["files"] if name not in ("journal.jsonl", RECORD_NAME))
    with tarfile.open(clean_bundle, "r:gz") as tar:
        size = tar.getmember(f"fixture-run/{big}").size
    assert size > 1024
    report = audit(clean_bundle)
    assert report.problems[0].startswith(f"bundle: {big} is {size} bytes, over its cap of 1024")
    assert report.problems[0].endswith("refused unread; the archive was not read further")
    assert read_member(clean_bundle, big) is None
