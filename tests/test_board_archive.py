"""Reading an uploaded image archive: identity from content, bounded parsing, the canonical archive.

No server: ``runner.sandbox.image_archive`` over archives built here (every digest true unless a test spoils
one), and hostile streams generated on the fly, never written out. The last tests load what the reader verified
into the real Docker engine, from the canonical archive the board writes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import secrets
import tarfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from board_fixtures import (
    CONTRACT_LABELS,
    engine_client,
    oci_save,
    synthetic_image,
    synthetic_save,
    tar_bytes,
    tiny_contract_image,
)

from runner.sandbox.canonical import canonical_bytes, layer_name, load_verified
from runner.sandbox.image_archive import (
    ArchiveLimits,
    ArchiveRefused,
    StreamReader,
    VerifiedImage,
    read_image_archive,
)

RUN = secrets.token_hex(4)
GIB = 1024**3


def _read(body: bytes, folder: Path, limits: ArchiveLimits | None = None) -> VerifiedImage:
    return read_image_archive(io.BytesIO(body), folder, limits)


def _refusal(body: bytes, folder: Path, limits: ArchiveLimits | None = None) -> str:
    with pytest.raises(ArchiveRefused) as refused:
        _read(body, folder, limits)
    return str(refused.value)


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_a_docker_save_is_named_by_the_sha256_of_its_config_and_keeps_only_config_and_layers(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    saved = synthetic_save((members, entry))
    image = _read(tar_bytes({**saved, "unrelated/file": b"ignored"}), tmp_path / "blobs")
    config = members[entry["Config"]]
    layer = members[entry["Layers"][0]]
    assert (image.image_id, image.layout, image.labels, image.named_by) == (
        _sha(config),
        "docker-save",
        CONTRACT_LABELS,
        {},
    )
    assert [(b.digest, b.diff_digest, b.gzip) for b in image.layers] == [(_sha(layer), _sha(layer), False)]
    assert sorted(p.name for p in (tmp_path / "blobs").iterdir()) == sorted({_sha(config)[7:], _sha(layer)[7:]})


def test_an_oci_layout_with_gzip_layers_is_followed_by_digest_and_unpacked_while_hashed(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    layer = members[entry["Layers"][0]]
    image = _read(tar_bytes(oci_save(members, entry, gzip_layers=True)), tmp_path / "blobs")
    assert (image.image_id, image.layout) == (_sha(members[entry["Config"]]), "oci")
    (blob,) = image.layers
    assert (blob.gzip, blob.diff_digest, blob.diff_size) == (True, _sha(layer), len(layer))
    with tarfile.open(fileobj=io.BytesIO(canonical_bytes(image))) as canonical:
        assert [(m.name, m.type, m.pax_headers) for m in canonical] == [
            ("manifest.json", tarfile.REGTYPE, {}),
            ("config.json", tarfile.REGTYPE, {}),
            (layer_name(0), tarfile.REGTYPE, {}),
        ]
        assert json.loads(canonical.extractfile("manifest.json").read()) == [  # type: ignore[union-attr]
            {"Config": "config.json", "RepoTags": None, "Layers": [layer_name(0)]}
        ]
        assert canonical.extractfile(layer_name(0)).read() == layer  # type: ignore[union-attr]


def test_a_config_named_for_another_images_id_is_refused_naming_both(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    other = "ab" * 32  # an image already on the engine, say, whose id is public
    config = members.pop(entry["Config"])
    renamed = {**members, f"{other}.json": config}
    body = tar_bytes(synthetic_save((renamed, {**entry, "Config": f"{other}.json"})))
    assert _refusal(body, tmp_path / "blobs") == (
        f"refused: '{other}.json' is named for sha256:{other} but its bytes hash to {_sha(config)}"
    )


def test_a_layer_that_is_not_the_one_the_config_names_is_refused(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    named = members[entry["Layers"][0]]
    members[entry["Layers"][0]] = swapped = tar_bytes({"hello": b"something else"})
    message = _refusal(tar_bytes(synthetic_save((members, entry))), tmp_path / "blobs")
    assert message == (
        f"refused: layer 0 ('{entry['Layers'][0]}') hashes to {_sha(swapped)} unpacked; the config's "
        f"rootfs.diff_ids names {_sha(named)}"
    )


def test_an_oci_blob_whose_bytes_are_not_its_digest_is_not_found(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    layout = oci_save(members, entry)
    layer_path = next(name for name, data in layout.items() if data == members[entry["Layers"][0]])
    layout[layer_path] = b"not the layer"
    digest = layer_path.replace("blobs/sha256/", "sha256:")
    assert _refusal(tar_bytes(layout), tmp_path / "blobs") == (
        f"not a docker save archive: no member of the archive hashes to layer 0's digest {digest}"
    )


def _pax_stream(header_bytes: int, read: list[int]) -> Iterator[bytes]:
    """A tar stream opening with a PAX header of ``header_bytes`` bytes, generated as it is read (``read`` counts
    the bytes handed out): nothing of that size ever exists."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, header_bytes
    head = info.tobuf(format=tarfile.USTAR_FORMAT)
    read[0] += len(head)
    yield head
    record = b"%d path=" % header_bytes
    piece = record + b"a" * (1024 * 1024 - len(record))
    sent = 0
    while sent < header_bytes:
        chunk = piece[: header_bytes - sent]
        sent += len(chunk)
        read[0] += len(chunk)
        yield chunk
        piece = b"a" * len(piece)


def test_a_1_gib_pax_header_is_refused_with_a_few_mib_of_memory_without_reading_it(tmp_path: Path) -> None:
    read = [0]
    chunks = _pax_stream(GIB, read)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ArchiveRefused) as refused:
            read_image_archive(StreamReader(lambda: next(chunks, b"")), tmp_path / "blobs")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(refused.value) == f"refused: a tar extended header of {GIB} bytes (the limit is {64 * 1024})"
    assert peak < 8 * 1024 * 1024, peak
    assert read[0] < 2 * 1024 * 1024, read[0]  # the header's first piece, not the gigabyte
    assert time.monotonic() - started < 10


def test_a_long_gnu_name_and_too_many_small_headers_are_refused_at_their_bounds(tmp_path: Path) -> None:
    long_name = tarfile.TarInfo("x" * 200_000)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(long_name, io.BytesIO(b""))
    assert _refusal(out.getvalue(), tmp_path / "a").startswith("refused: a tar extended header of 200001 bytes")
    many = io.BytesIO()
    with tarfile.open(fileobj=many, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for n in range(40):
            info = tarfile.TarInfo(f"{n}-" + "y" * 900)  # a PAX path record of ~1 KiB each
            tar.addfile(info, io.BytesIO(b""))
    limits = ArchiveLimits(max_headers_total=16 * 1024)
    assert _refusal(many.getvalue(), tmp_path / "b", limits) == (
        "refused: the archive's extended headers pass 16384 bytes together"
    )


def test_a_sparse_member_and_a_device_are_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        sparse = tarfile.TarInfo("holes")
        sparse.type = tarfile.GNUTYPE_SPARSE
        tar.addfile(sparse)
    assert _refusal(out.getvalue(), tmp_path / "a") == (
        "refused: the archive holds a sparse file, which no image archive does"
    )
    device = io.BytesIO()
    with tarfile.open(fileobj=device, mode="w") as tar:
        node = tarfile.TarInfo("dev/sda")
        node.type = tarfile.BLKTYPE
        tar.addfile(node)
    assert _refusal(device.getvalue(), tmp_path / "b") == "refused: 'dev/sda' is a device, fifo or other special file"


def test_a_flood_of_members_is_refused_at_the_bound(tmp_path: Path) -> None:
    flood = tar_bytes({f"m/{n}": b"" for n in range(101)})
    assert _refusal(flood, tmp_path / "blobs", ArchiveLimits(max_members=100)) == (
        "refused: the archive has over 100 members"
    )


def test_a_gzip_bomb_stops_at_the_unpacked_bound(tmp_path: Path) -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), mtime=0)  # 64 MiB of zeros in ~64 KiB
    limits = ArchiveLimits(max_unpacked_bytes=8 * 1024 * 1024)
    assert _refusal(tar_bytes({"bomb.gz": bomb}), tmp_path / "blobs", limits) == (
        "refused: the archive's gzip members unpack past 8388608 bytes"
    )


def _pax_named(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("placeholder")
        info.size = len(data)
        info.pax_headers = {"path": name}
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_a_member_name_with_a_nul_is_refused(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    clean = tar_bytes(synthetic_save((members, entry)))
    # The engine's tar reader stops a name at NUL: a second manifest.json to it, to Python another name.
    hostile = _pax_named("manifest.json\0x", json.dumps([{**entry, "RepoTags": ["boardattack/newtag:pwned"]}]).encode())
    body = _concatenated(clean, hostile)
    assert (
        _refusal(body, tmp_path / "blobs")
        == "refused: the member name 'manifest.json\\x00x' holds the character U+0000"
    )


def _concatenated(first: bytes, second: bytes) -> bytes:
    """The members of two tars in one (the first's end-of-archive blocks dropped)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for part in (first, second):
            with tarfile.open(fileobj=io.BytesIO(part)) as src:
                for member in src:
                    tar.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue()


@pytest.mark.parametrize(
    ("links", "extra", "message"),
    [
        ({"d": "."}, {"d/manifest.json": b"[]"}, "refused: the link 'd' points at '.', a directory"),
        (
            {"index.json": "missing.json"},
            {},
            "refused: the link 'index.json' points at 'missing.json', nothing the archive holds",
        ),
        ({"a": "b", "b": "manifest.json"}, {}, "refused: the link 'a' points at 'b', another link"),
        ({"evil": "/etc/shadow"}, {}, "refused: 'evil' links outside the archive ('/etc/shadow')"),
    ],
)
def test_links_other_than_another_name_of_a_file_are_refused(
    tmp_path: Path, links: dict[str, str], extra: dict[str, bytes], message: str
) -> None:
    saved = synthetic_save(synthetic_image(CONTRACT_LABELS))
    assert _refusal(tar_bytes({**saved, **extra}, links=links), tmp_path / "blobs") == message


def test_a_name_through_a_link_is_refused(tmp_path: Path) -> None:
    saved = synthetic_save(synthetic_image(CONTRACT_LABELS))
    body = tar_bytes({**saved, "real/x": b"x", "d/manifest.json": b"[]"}, links={"d": "real/x"})
    assert _refusal(body, tmp_path / "blobs") == "refused: the member 'd/manifest.json' passes through the link 'd'"


def test_a_link_to_a_layer_stands_for_that_layer_as_docker_save_writes_a_repeated_layer(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    config = json.loads(members[entry["Config"]])
    config["rootfs"]["diff_ids"] *= 2
    config_bytes = json.dumps(config).encode()
    layer = entry["Layers"][0]
    again = "again/layer.tar"
    twice = {f"{_sha(config_bytes)[7:]}.json": config_bytes, layer: members[layer]}
    manifest = {"Config": f"{_sha(config_bytes)[7:]}.json", "RepoTags": None, "Layers": [layer, again]}
    image = _read(tar_bytes(synthetic_save((twice, manifest)), links={again: f"../{layer}"}), tmp_path / "blobs")
    assert [b.digest for b in image.layers] == [_sha(members[layer])] * 2


def test_names_the_archive_gives_the_image_are_reported(tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS)
    tagged = synthetic_save((members, {**entry, "RepoTags": ["victim:latest"]}))
    image = _read(tar_bytes({**tagged, "repositories": b'{"victim": {"latest": "x"}}'}), tmp_path / "blobs")
    assert image.named_by == {"manifest.json": '["victim:latest"]', "repositories": '{"victim": {"latest": "x"}}'}


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with engine_client(f"ispm-test-archive-{RUN}:") as engine:
        yield engine


@pytest.mark.docker
def test_a_real_docker_save_by_id_verifies_to_the_engines_own_id(client: Any, tmp_path: Path) -> None:
    image_id = tiny_contract_image(client, tmp_path / "context", f"ispm-test-archive-{RUN}:agent", f"agent {RUN}")
    chunks = iter(client.images.get(image_id).save(named=False))
    image = read_image_archive(StreamReader(lambda: next(chunks, b"")), tmp_path / "blobs")
    assert (image.image_id, image.labels, image.named_by) == (image_id, CONTRACT_LABELS, {})


@pytest.mark.docker
def test_an_oci_upload_with_gzip_layers_loads_as_the_image_its_config_names(client: Any, tmp_path: Path) -> None:
    members, entry = synthetic_image(CONTRACT_LABELS, f"oci {RUN}".encode())
    image = _read(tar_bytes(oci_save(members, entry, gzip_layers=True)), tmp_path / "blobs")
    tag = f"ispm-test-archive-{RUN}:oci"
    loaded = load_verified(image, tag)
    assert loaded.image_id == image.image_id == str(client.images.get(tag).id)
    assert client.images.get(tag).attrs["RootFS"]["Layers"] == [image.layers[0].diff_digest]
