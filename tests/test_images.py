"""The registry-free images: built (or reused) through ensure_images(), then exercised on the real engine.

Every container made here carries the label ``ispm.test=1`` and is removed in a ``finally``. The input
digest tests at the end need no Docker.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from runner.sandbox import images
from runner.sandbox.images import ImageRef, ensure_images

TEST_LABELS = {"ispm.test": "1", "ispm.test.module": "test_images"}
AGENT_USER = "10001:10001"


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    engine = docker.from_env()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def refs(client: Any) -> dict[str, ImageRef]:
    return ensure_images(client)


def run(client: Any, image: str, command: list[str] | None = None, **options: Any) -> tuple[int, str, str]:
    """Run one locked-down container to completion; returns (exit code, stdout, stderr)."""
    settings: dict[str, Any] = {
        "labels": TEST_LABELS,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {"/tmp": "size=16m"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "user": AGENT_USER,
        **options,
    }
    container = client.containers.create(image, command, **settings)
    try:
        container.start()
        code = int(container.wait(timeout=120)["StatusCode"])
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        return code, out, err
    finally:
        container.remove(force=True)


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A tiny world database file."""
    path = tmp_path / "world" / "tiny.sqlite"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, vendor TEXT, login TEXT);"
        "INSERT INTO accounts VALUES (1, 'okta', 'ann@corp.example'), (2, 'aws', 'AnnLee-Admin');"
    )
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def output(tmp_path: Path) -> Path:
    """A writable /output for uid 10001."""
    folder = tmp_path / "output"
    folder.mkdir()
    folder.chmod(0o777)
    return folder


def mounts(world: Path, output: Path) -> dict[str, dict[str, str]]:
    return {
        str(world): {"bind": f"/world/{world.name}", "mode": "ro"},
        str(output): {"bind": "/output", "mode": "rw"},
    }


@pytest.mark.docker
def test_tags_follow_input_digests(refs: dict[str, ImageRef]) -> None:
    assert set(refs) == {
        "base",
        "agent-null",
        "agent-replay",
        "agent-reference",
        "agent-claude-code",
        "agent-openai-agents",
        "agent-codex",
        "agent-gemini",
        "agent-mini-swe-agent",
    }
    assert images.expected_tags() == {name: ref.tag for name, ref in refs.items()}
    for ref in refs.values():
        assert ref.tag == f"ispm/{ref.name}:{ref.input_digest[7:19]}"
        assert ref.id.startswith("sha256:")
    assert images.load_record() == refs


@pytest.mark.docker
def test_base_has_python_and_sqlite(client: Any, refs: dict[str, ImageRef]) -> None:
    code, out, err = run(client, refs["base"].tag, ["python3", "-c", "import json, sqlite3; print('py ok')"])
    assert (code, out.strip()) == (0, "py ok"), err
    code, out, err = run(client, refs["base"].tag, ["sqlite3", "-version"])
    assert code == 0, err
    assert out.startswith("3.")


@pytest.mark.docker
def test_base_is_what_the_rootfs_says(client: Any, refs: dict[str, ImageRef]) -> None:
    base = refs["base"]
    image = client.images.get(base.tag)
    assert image.attrs["RootFS"]["Layers"] == [f"sha256:{base.rootfs_sha256}"]
    assert image.labels[images.LABEL_DIGEST] == base.input_digest
    code, out, err = run(client, base.tag, ["sh", "-c", "id -un; sha256sum /usr/local/bin/ispm-sql"])
    assert code == 0, err
    user, tool = out.splitlines()
    assert user == "agent"
    source = Path(images.images_dir() / "base" / "ispm-sql").read_bytes()
    assert tool.split()[0] == hashlib.sha256(source).hexdigest()


@pytest.mark.docker
def test_sql_tool_in_container_with_read_only_world(
    client: Any, refs: dict[str, ImageRef], world: Path, output: Path
) -> None:
    before = hashlib.sha256(world.read_bytes()).hexdigest()
    sql = "SELECT vendor, login FROM accounts ORDER BY id"
    code, out, err = run(client, refs["base"].tag, ["ispm-sql", "--json", sql], volumes=mounts(world, output))
    assert code == 0, err
    payload = json.loads(out)
    assert payload["rows"] == [["okta", "ann@corp.example"], ["aws", "AnnLee-Admin"]]

    code, _, err = run(client, refs["base"].tag, ["ispm-sql", "DELETE FROM accounts"], volumes=mounts(world, output))
    assert code == 1
    assert "read-only" in err
    assert hashlib.sha256(world.read_bytes()).hexdigest() == before

    logged = [json.loads(line) for line in (output / "queries.jsonl").read_text().splitlines()]
    assert [entry["sql"] for entry in logged] == [sql, "DELETE FROM accounts"]
    assert logged[0]["row_count"] == 2 and logged[0]["error"] is None
    assert logged[1]["error"] is not None


@pytest.mark.docker
def test_null_agent_writes_an_empty_answer(client: Any, refs: dict[str, ImageRef], world: Path, output: Path) -> None:
    code, _, err = run(client, refs["agent-null"].tag, volumes=mounts(world, output))
    assert code == 0, err
    answer = json.loads((output / "answer.json").read_text())
    assert answer == {"response": "", "verdict": None, "evidence": [], "queries": []}


@pytest.mark.docker
def test_replay_agent_replays_queries_then_answer(
    client: Any, refs: dict[str, ImageRef], world: Path, output: Path, tmp_path: Path
) -> None:
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.json").write_text(json.dumps({"task_id": "ispm-007", "kind": "verdict"}))
    replay = tmp_path / "replay"
    replay.mkdir()
    recorded = {"response": "Ann is an admin in AWS.", "verdict": "yes", "evidence": [], "queries": ["q"]}
    queries = ["SELECT count(*) FROM accounts", "SELECT login FROM accounts WHERE vendor = 'aws'"]
    (replay / "ispm-007.json").write_text(json.dumps({"queries": queries, "answer": recorded}))
    volumes = {
        **mounts(world, output),
        str(task): {"bind": "/task", "mode": "ro"},
        str(replay): {"bind": "/replay", "mode": "ro"},
    }
    code, _, err = run(client, refs["agent-replay"].tag, volumes=volumes)
    assert code == 0, err
    assert json.loads((output / "answer.json").read_text()) == recorded
    logged = [json.loads(line) for line in (output / "queries.jsonl").read_text().splitlines()]
    assert [entry["sql"] for entry in logged] == queries
    assert all(entry["error"] is None for entry in logged)

    (replay / "ispm-007.json").unlink()
    (output / "answer.json").unlink()
    code, _, err = run(client, refs["agent-replay"].tag, volumes=volumes)
    assert code != 0
    assert "no recording for task 'ispm-007'" in err
    assert not (output / "answer.json").exists()


@pytest.mark.docker
def test_second_ensure_images_reuses_everything(client: Any, refs: dict[str, ImageRef]) -> None:
    again = ensure_images(client)
    assert all(not ref.built for ref in again.values())
    assert {n: r.id for n, r in again.items()} == {n: r.id for n, r in refs.items()}


@pytest.mark.docker
def test_no_test_containers_left(client: Any, refs: dict[str, ImageRef]) -> None:
    left = client.containers.list(all=True, filters={"label": "ispm.test.module=test_images"})
    assert left == []


@pytest.mark.slow
@pytest.mark.docker
def test_rootfs_build_is_reproducible(tmp_path: Path, refs: dict[str, ImageRef]) -> None:
    started = time.monotonic()
    first = images.build_rootfs(tmp_path / "a" / "rootfs.tar")
    seconds = time.monotonic() - started
    second = images.build_rootfs(tmp_path / "b" / "rootfs.tar")
    assert first == second, f"two builds differ: {first} vs {second}"
    tarball = tmp_path / "a" / "rootfs.tar"
    size = tarball.stat().st_size
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        partial = tar.getmember("./var/lib/apt/lists/partial")
    # apt downloaded inside its _apt sandbox, whatever the permissions around tmp_path (0700).
    assert partial.uid != 0
    # The build host's resolver and name, and apt's package lists, stay out of the image.
    assert {"./etc/resolv.conf", "./etc/hostname"}.isdisjoint(names)
    assert not [n for n in names if n.startswith("./var/lib/apt/lists/") and n.endswith("Packages")]
    assert "./usr/local/bin/ispm-sql" in names
    print(f"rootfs: sha256 {first}, {size / 1e6:.1f} MB, one build {seconds:.1f} s")
    if refs["base"].built:
        # Built from the same mirror state minutes ago, so the imported layer must match too.
        assert refs["base"].rootfs_sha256 == first


@pytest.mark.docker
def test_prune_removes_only_out_of_date_tags(client: Any, refs: dict[str, ImageRef]) -> None:
    # Dry run only: a real prune here would also take tags that another checkout on this engine uses.
    client.images.get(refs["base"].tag).tag("ispm/base", "000000000000")
    try:
        planned = images.prune_stale(client, keep=refs, dry_run=True)
    finally:
        client.images.remove("ispm/base:000000000000")
    assert "ispm/base:000000000000" in planned
    assert not [tag for tag in planned if tag.endswith(":latest")]
    assert {ref.tag for ref in refs.values()}.isdisjoint(planned)
    for ref in refs.values():
        assert client.images.get(ref.tag).id == ref.id


@pytest.fixture
def image_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch copy of images/ that input_digest() reads instead of the checkout."""
    copy = tmp_path / "images"
    shutil.copytree(images.images_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(images, "images_dir", lambda: copy)
    return copy


def test_digest_follows_every_input(image_inputs: Path, tmp_path: Path) -> None:
    sources = tmp_path / "debian.sources"
    sources.write_text("Types: deb\nURIs: file:/srv/apt/debian\nSuites: bookworm\nComponents: main\n")
    start = images.expected_tags([sources])
    assert images.expected_tags([sources]) == start  # deterministic

    (image_inputs / "agents" / "null" / "agent.py").write_text("# changed\n", encoding="utf-8")
    after_agent = images.expected_tags([sources])
    assert after_agent["agent-null"] != start["agent-null"]
    assert after_agent["base"] == start["base"]
    assert after_agent["agent-replay"] == start["agent-replay"]

    with (image_inputs / "base" / "ispm-sql").open("a", encoding="utf-8") as tool:
        tool.write("# changed\n")
    after_tool = images.expected_tags([sources])
    # A new base means new children too: they are built FROM it.
    assert all(after_tool[name] != after_agent[name] for name in after_tool)

    sources.write_text(sources.read_text() + "Signed-By: /usr/share/keyrings/x.gpg\n")
    assert images.expected_tags([sources])["base"] != after_tool["base"]


def test_digest_ignores_bytecode(image_inputs: Path, tmp_path: Path) -> None:
    before = images.expected_tags([])
    cache = image_inputs / "agents" / "replay" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "agent.cpython-311.pyc").write_bytes(b"\x00")
    assert images.expected_tags([]) == before


HEX = "0123456789abcdef" * 4
PINNING = [
    ("debian@sha256:" + HEX, True),
    ("docker.example/library/debian:bookworm-slim@sha256:" + HEX, True),
    ("sha256:" + HEX, True),
    ("debian:bookworm", False),
    ("debian", False),
    ("debian@sha256:" + HEX[:40], False),
    ("sha256:" + HEX.upper(), False),
    ("debian@sha256:" + HEX + " ; rm -rf /", False),
]


@pytest.mark.parametrize(("ref", "pinned"), PINNING, ids=[r for r, _ in PINNING])
def test_an_upstream_base_must_be_pinned_by_digest(ref: str, pinned: bool) -> None:
    if pinned:
        assert images.check_pinned(ref) == ref
    else:
        with pytest.raises(images.ImageError, match="is not pinned"):
            images.check_pinned(ref)


def test_the_upstream_base_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(images.UPSTREAM_ENV, raising=False)
    assert images.upstream_base() is None
    monkeypatch.setenv(images.UPSTREAM_ENV, "debian:bookworm")
    with pytest.raises(images.ImageError, match="ISPM_UPSTREAM_BASE='debian:bookworm' is not pinned"):
        images.upstream_base()
    monkeypatch.setenv(images.UPSTREAM_ENV, " debian@sha256:" + HEX + " ")
    assert images.upstream_base() == "debian@sha256:" + HEX


def test_an_upstream_base_changes_every_tag_and_each_pin_its_own(
    image_inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(images.UPSTREAM_ENV, raising=False)
    sources = tmp_path / "sources.list"
    sources.write_text("deb http://mirror.invalid/debian bookworm main\n")
    debian = images.expected_tags([sources])
    one = images.expected_tags([sources], upstream="debian@sha256:" + HEX)
    other = images.expected_tags([sources], upstream="debian@sha256:" + HEX[::-1])
    for name in debian:
        assert len({debian[name], one[name], other[name]}) == 3, name
    # With an upstream base the host's apt sources are no input: they are never read.
    sources.write_text("deb http://other.invalid/debian bookworm main\n")
    assert images.expected_tags([sources], upstream="debian@sha256:" + HEX) == one


@pytest.mark.docker
def test_the_upstream_path_builds_a_contract_base_on_a_pinned_image(client: Any, refs: dict[str, ImageRef]) -> None:
    # No registry here, so the pinned upstream is an image id this engine has: our own Debian-built base.
    upstream = refs["base"].id
    tag = "ispm/test-upstream-base:" + refs["base"].input_digest[7:19]
    image = images.build_upstream_base(client, upstream, tag, "sha256:" + HEX)
    try:
        assert image.labels[images.LABEL_DIGEST] == "sha256:" + HEX
        probe = (
            "set -e; id -u agent; grep -c '^agent:' /etc/passwd; ls -d /task /world /docs /output; "
            "python3 -c 'import sqlite3; print(sqlite3.sqlite_version)'; ispm-sql --help >/dev/null && echo tool; "
            "ls /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | wc -l; ls /ispm-build 2>&1 || true"
        )
        code, out, err = run(client, tag, ["sh", "-c", probe])
        assert code == 0, err
        lines = out.split()
        assert lines[:2] == ["10001", "1"]  # the agent user, exactly once
        assert sorted(lines[2:6]) == ["/docs", "/output", "/task", "/world"]
        assert "tool" in lines and lines[lines.index("tool") + 1] == "0"  # no apt sources left in the image
        assert "No such file" in out + err  # the build folder is gone
    finally:
        client.images.remove(tag, force=True)
