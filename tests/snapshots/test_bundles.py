"""Bundles: what goes out comes back the same, and hostile archives are refused whole."""

import gzip
import io
import json
import tarfile

import pytest

from analysis.evidence import NodeEvidence, SnapshotEvidence
from collectors.bundles import (
    BundleLimits,
    BundleRefused,
    read_bundle,
    read_bundle_bytes,
    write_bundle,
)


def _evidence() -> SnapshotEvidence:
    node = NodeEvidence(
        node="gpu-0",
        hostname="gpu-0",
        ps="  PID  PPID STAT ETIMES ARGS\n  101     1 Sl      50 python train.py\n",
        environ={101: b"RANK=0\x00WORLD_SIZE=2\x00NCCL_DEBUG=INFO\x00"},
        pyspy={101: '[{"thread_id": 1, "frames": []}]'},
        pyspy_errors={102: "Permission denied"},
        dmesg="[Sun Nov 29 09:00:00 2026] Out of memory: Killed process 102 (python)\n",
        logs={"/var/log/train/rank0.log": "2026-11-29 09:00:00,000 INFO [rank0] step=3\n"},
        flight_recorder={"/var/log/train/fr/trace_rank_0": b"\x80\x04binary\xff"},
        shell_init="/etc/profile.d/nccl.sh:export NCCL_IB_HCA=mlx5_0\n",
        system={"loadavg": "0.5 0.4 0.3 1/100 123"},
        truncated=["logs:/var/log/train/rank0.log", "output"],
    )
    gone = NodeEvidence(node="gpu-1", status="unreachable: connection refused")
    return SnapshotEvidence(nodes=[node, gone], expected_world_size=2, cluster="gpt-train")


def test_a_bundle_reads_back_as_the_evidence_it_was_written_from():
    original = _evidence()
    again = read_bundle_bytes(write_bundle(original))
    assert again.expected_world_size == 2 and again.cluster == "gpt-train"
    first, second = again.nodes
    source = original.nodes[0]
    for field in ("ps", "environ", "pyspy", "pyspy_errors", "dmesg", "logs", "flight_recorder"):
        assert getattr(first, field) == getattr(source, field), field
    assert first.shell_init == source.shell_init and first.system == source.system
    assert first.truncated == ["logs:/var/log/train/rank0.log", "output"]
    assert (second.node, second.status) == ("gpu-1", "unreachable: connection refused")


def test_a_directory_of_plain_files_is_a_bundle(tmp_path):
    (tmp_path / "pod-3" / "logs").mkdir(parents=True)
    (tmp_path / "pod-3" / "logs" / "rank3.log").write_text("step=9\n")
    (tmp_path / "manifest.json").write_text('{"world_size": 4}')
    evidence = read_bundle(tmp_path)
    assert evidence.expected_world_size == 4
    assert evidence.nodes[0].logs == {"rank3.log": "step=9\n"}


def _tar(members) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, content in members:
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def _file(name: str, content: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    return info, content


def _link(name: str, target: str, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([_file("../../etc/cron.d/evil")], "'..' is not allowed"),
        ([_file("gpu-0/../../escape")], "'..' is not allowed"),
        ([_file("/etc/passwd")], "absolute paths are not allowed"),
        ([_link("gpu-0/dmesg.txt", "/etc/shadow")], "links are not allowed"),
        ([_link("gpu-0/ps.txt", "gpu-0/dmesg.txt", tarfile.LNKTYPE)], "links are not allowed"),
        ([_file("manifest.json", b"{not json")], "manifest.json is not valid JSON"),
        ([_file("manifest.json", b"[1, 2]")], "must hold a JSON object"),
        ([_file("manifest.json", b'{"format": 7}')], "format 7 is not supported"),
    ],
)
def test_a_hostile_bundle_is_refused_with_the_reason(members, message):
    with pytest.raises(BundleRefused, match=message):
        read_bundle_bytes(_tar(members))


def test_a_device_file_is_refused():
    info = tarfile.TarInfo("gpu-0/dmesg.txt")
    info.type = tarfile.CHRTYPE
    with pytest.raises(BundleRefused, match="only regular files"):
        read_bundle_bytes(_tar([(info, None)]))


def test_a_decompression_bomb_is_refused_before_it_is_unpacked():
    # 64 MiB of zeros compresses to ~64 KiB; the limit stops it from the header alone.
    bomb = _tar([_file("gpu-0/dmesg.txt", bytes(64 * 1024 * 1024))])
    assert len(bomb) < 200_000
    limits = BundleLimits(max_file_bytes=8 * 1024 * 1024)
    with pytest.raises(BundleRefused, match="over the 8388608 limit"):
        read_bundle_bytes(bomb, limits)
    many = _tar([_file(f"gpu-0/logs/{i}.log", bytes(1024 * 1024)) for i in range(5)])
    with pytest.raises(BundleRefused, match="bytes once unpacked"):
        read_bundle_bytes(many, BundleLimits(max_total_bytes=3 * 1024 * 1024))


def test_too_many_members_are_refused():
    members = [_file(f"gpu-0/logs/{i}.log") for i in range(20)]
    with pytest.raises(BundleRefused, match="more than 10 entries"):
        read_bundle_bytes(_tar(members), BundleLimits(max_members=10))


def test_garbage_is_not_an_archive():
    with pytest.raises(BundleRefused, match="not a readable tar archive"):
        read_bundle_bytes(gzip.compress(b"definitely not tar" * 100))


def test_a_directory_bundle_with_a_link_is_refused(tmp_path):
    (tmp_path / "gpu-0").mkdir()
    (tmp_path / "gpu-0" / "dmesg.txt").symlink_to("/etc/passwd")
    with pytest.raises(BundleRefused, match="links are not allowed"):
        read_bundle(tmp_path)


def test_the_manifest_is_plain_json_a_person_can_read():
    with tarfile.open(fileobj=io.BytesIO(write_bundle(_evidence())), mode="r:gz") as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        names = tar.getnames()
    assert manifest["format"] == 1 and manifest["world_size"] == 2
    assert "gpu-0/environ/101" in names
    assert "gpu-0/logs/var/log/train/rank0.log" in names
    assert "gpu-0/pyspy/101.json" in names


def test_an_artifact_cut_by_the_node_is_flagged_and_a_huge_one_is_cut_here():
    from collectors.artifacts import ARTIFACT_CAP_BYTES, artifacts_from_evidence

    node = _evidence().nodes[0]
    node.dmesg = "x" * (ARTIFACT_CAP_BYTES + 10)
    flags = {name: (cut, data) for name, data, cut in artifacts_from_evidence(node)}
    assert flags["logs//var/log/train/rank0.log"][0] is True  # the node said so
    assert flags["ps.txt"][0] is False
    cut, data = flags["dmesg.txt"]
    assert cut and data.endswith(b"[... truncated by hangdesk at 8388608 bytes ...]\n")
    meta = json.loads(flags["node.json"][1])
    assert "dmesg" in meta["truncated"]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"2026-11-29 09:15:14 INFO [rank3] step=4\n", "it is plain text (a log?"),
        (b'{"classification": "A"}', "it is JSON text"),
        (b"PK\x03\x04" + b"\0" * 40, "it is a zip archive"),
        (b"", "the file is empty"),
        (bytes(range(256)), "neither a tar archive nor a gzip, bzip2 or xz stream"),
    ],
)
def test_a_file_that_is_no_bundle_is_refused_in_plain_words(content, said):
    with pytest.raises(BundleRefused) as refused:
        read_bundle_bytes(content)
    message = str(refused.value)
    assert message.startswith("this is not an evidence bundle: ") and said in message
    assert "docs/bundle-format.md" in message and "header" not in message
