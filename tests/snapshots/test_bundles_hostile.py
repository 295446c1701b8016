"""Bundles are untrusted uploads: headers are checked before what they announce is read, and a
malformed bundle is refused with its reason (BundleRefused), never a traceback.

The bombs run in a child under RLIMIT_AS 1 GiB (tests.hostile.run_limited): `tarfile` read a
GNU long name or a PAX header whole, so before the streaming reader these took 1.5 GiB each.
"""

import io
import json
import tarfile

import pytest

from collectors.bundles import BundleLimits, BundleRefused, read_bundle, read_bundle_bytes
from collectors.tarstream import TarLimits, TarRefused, read_tar
from tests import hostile
from tests.hostile import MiB, tar_file, tar_gz, tar_header

PS = b"PID PPID STAT ELAPSED COMMAND\n"

_READ = """
import sys
from collectors.bundles import BundleRefused, read_bundle_bytes
from tests import hostile
try:
    evidence = read_bundle_bytes(eval(sys.argv[1]))
except BundleRefused as exc:
    print("refused:", exc)
else:
    print("read:", len(evidence.nodes))
"""


@pytest.mark.parametrize(
    ("kind", "message"),
    [(b"L", "a GNU long name of 1610612736 bytes is over"), (b"x", "a PAX header of 1610612736")],
    ids=["gnu-long-name", "pax-header"],
)
def test_an_extension_header_bomb_is_refused_from_its_header(kind, message):
    assert len(hostile.extension_header_bomb(kind)) < 2 * MiB
    done = hostile.run_limited(_READ, f"hostile.extension_header_bomb({kind!r})")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused: " + message)


def test_a_pax_size_past_the_file_limit_is_refused_before_reading():
    pax = b"25 size=1099511627776000\n"
    archive = tar_gz(
        tar_header(b"PaxHeader/ps", len(pax), b"x") + pax + bytes(512 - len(pax)),
        tar_file(b"gpu-0/ps.txt", PS),
    )
    with pytest.raises(BundleRefused, match="1099511627776000 bytes is over"):
        read_bundle_bytes(archive)


def test_a_long_name_past_path_max_is_refused():
    name = b"gpu-0/logs/" + b"a" * 5000
    archive = tar_gz(tar_header(b"././@LongLink", len(name), b"L") + name + bytes(-len(name) % 512))
    with pytest.raises(BundleRefused, match="a GNU long name of 5011 bytes is over the 4096"):
        read_bundle_bytes(archive)


def test_a_negative_size_is_refused():
    archive = tar_gz(tar_header(b"gpu-0/ps.txt", 0, size_field=b"\xff" * 12))
    with pytest.raises(BundleRefused, match="negative size"):
        read_bundle_bytes(archive)


def test_a_compression_bomb_is_refused_by_its_ratio():
    # 80 MiB of zeros in ~80 KiB: under generous size limits, the ratio still refuses it.
    archive = hostile.gz(tar_header(b"gpu-0/dmesg.txt", 80 * MiB)) + hostile.repeated_gz(
        b"\0", 80 * MiB
    )
    roomy = BundleLimits(max_file_bytes=1 << 30, max_total_bytes=1 << 30)
    with pytest.raises(BundleRefused, match="compression bomb"):
        read_bundle_bytes(archive, roomy)


def test_a_member_name_that_is_not_utf8_is_refused_with_the_reason():
    archive = tar_gz(tar_file(b"gpu-0/logs/\xff\xfe.log", b"x"))
    with pytest.raises(BundleRefused, match=r"logs/\\xff\\xfe.log: the member name is not UTF-8"):
        read_bundle_bytes(archive)


def test_a_directory_bundle_with_a_name_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / "gpu-0").mkdir()
    (tmp_path / "gpu-0" / "ps.txt").write_bytes(PS)
    (tmp_path / "gpu-0" / b"\xff.log".decode("utf-8", "surrogateescape")).write_bytes(b"x")
    with pytest.raises(BundleRefused, match="not UTF-8"):
        read_bundle(tmp_path)


@pytest.mark.parametrize("pid", ["²", "٣٣", "7" * 5000], ids=["superscript", "arabic", "long"])
def test_an_environ_file_not_named_by_ascii_digits_is_ignored(pid):
    archive = tar_gz(
        tar_file(b"gpu-0/ps.txt", PS),
        tar_file(f"gpu-0/environ/{pid}".encode(), b"RANK=0\0"),
        tar_file(f"gpu-0/pyspy/{pid}.json".encode(), b"[]"),
    )
    (node,) = read_bundle_bytes(archive).nodes
    assert node.environ == {} and node.pyspy == {} and node.ps == PS.decode()


def test_a_deeply_nested_manifest_is_refused_with_the_reason():
    archive = tar_gz(tar_file(b"manifest.json", hostile.deep_json(100_000, "nodes")))
    with pytest.raises(BundleRefused, match=r"manifest\.json is nested too deeply"):
        read_bundle_bytes(archive)


@pytest.mark.parametrize(
    "manifest",
    [
        {"nodes": {"gpu-0": ["not", "a", "dict"]}},
        {"nodes": {"gpu-0": {"status": {"deep": [1]}}}},
        {"nodes": [1, 2], "world_size": True, "cluster": {"x": 1}, "collected_at": 5},
    ],
)
def test_wrong_types_in_the_manifest_are_ignored(manifest):
    archive = tar_gz(
        tar_file(b"manifest.json", json.dumps(manifest).encode()), tar_file(b"gpu-0/ps.txt", PS)
    )
    evidence = read_bundle_bytes(archive)
    assert evidence.nodes[0].status == "ok" and evidence.expected_world_size is None
    assert evidence.cluster == "" and evidence.collected_at is None


def test_a_deeply_nested_node_json_is_ignored():
    archive = tar_gz(
        tar_file(b"gpu-0/node.json", hostile.deep_json(100_000, "hostname")),
        tar_file(b"gpu-0/ps.txt", PS),
    )
    (node,) = read_bundle_bytes(archive).nodes
    assert node.hostname == "" and node.ps == PS.decode()


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (tar_gz(tar_header(b"gpu-0/ps.txt", 4096) + b"short"), "ps.txt: the archive ends early"),
        (tar_gz(b"\x01" * 512), "not a readable tar archive: entry 1 has an unreadable checksum"),
        (tar_gz(tar_header(b"gpu-0/ps.txt", 0)[:-1] + b"!"), "bad header checksum"),
        (b"", "not an evidence bundle: the file is empty"),
        (b"\x1f\x8b\x08\x00garbage", "not a readable tar archive"),
        (tar_gz(tar_header(b"gpu-0/fifo", 0, b"6")), "only regular files are allowed"),
    ],
    ids=["truncated", "unreadable-checksum", "checksum", "empty", "bad-gzip", "fifo"],
)
def test_a_malformed_archive_is_refused_with_the_reason(archive, message):
    with pytest.raises(BundleRefused, match=message):
        read_bundle_bytes(archive)


def _members() -> list[tuple[str, bytes]]:
    deep_log = "gpu-0/logs/var/log/" + "long-directory-name/" * 12 + "rank0.log"
    return [
        ("manifest.json", b'{"format": 1}'),
        ("gpu-0/ps.txt", PS),
        (deep_log, b"step 1\n"),
        ("gpu-0/logs/var/log/ünïcödé-✓.log", b"x" * 700),
    ]


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
@pytest.mark.parametrize("compression", ["gz", "bz2", "xz", ""])
def test_archives_python_writes_read_the_same(fmt, compression):
    members = _members()
    if fmt == tarfile.USTAR_FORMAT:  # USTAR has no room for a 260-character name
        members = [m for m in members if len(m[0]) <= 100]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}", format=fmt) as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    buffer.seek(0)
    got = [(m.name, m.content) for m in read_tar(buffer)]
    assert got == members


def test_the_member_limit_counts_extension_headers_too():
    name = b"gpu-0/logs/" + b"a" * 200
    long_named = tar_header(b"././@LongLink", len(name), b"L") + name + bytes(-len(name) % 512)
    with pytest.raises(TarRefused, match="more than 3 entries"):
        archive = io.BytesIO(tar_gz(long_named * 3, tar_file(b"x", b"")))
        list(read_tar(archive, TarLimits(max_members=3)))
