"""One table names every kind of evidence: what the probe sends under a key comes out of the
store and of a bundle as the same piece, and a piece cut on the node is marked cut everywhere."""

from __future__ import annotations

import io
import tarfile

from analysis.evidence import NodeEvidence, SnapshotEvidence
from collectors.bundles import read_bundle_bytes, write_bundle
from hangdesk import evidence_kinds as kinds
from hangdesk.artifacts import artifacts_from_evidence, evidence_from_artifacts
from hangdesk.frames import FrameReader, evidence_from_frames


def _frame(key: str, body: bytes) -> bytes:
    return b"HD1 %s %d\n" % (key.encode(), len(body)) + body


# One frame of every kind the probe sends, each one marked cut on the node.
FRAMES = {
    "ps": b"  PID  PPID STAT ETIMES ARGS\n  42     1 Sl      50 python train.py\n",
    "env.42": b"RANK=3\0WORLD_SIZE=4\0",
    "pyspy.42": b'[{"thread_id": 1, "frames": []}]',
    "pyspyerr.43": b"Permission denied",
    "pyspyrec.42": b"thread (42): MainThread;main (train.py:9);all_reduce (c10d.py:3252) 93\n",
    "dmesg": b"[  1.0] NVRM: Xid 79\n",
    "nvsmi": b"| 0  NVIDIA H100 |\n",
    "shellinit": b"/etc/profile:export NCCL_DEBUG=INFO\n",
    "ncclras": b'{"nccl_version": "2.29.1", "communicators": []}\n',
    "sys.loadavg": b"0.5 0.4 0.3 1/100 123\n",
    "log.1.path": b"/var/log/train/rank3.log",
    "log.1": b"step=1 \xff\n",
    "fr.1.path": b"/var/log/fr/trace_rank_3",
    "fr.1": bytes(range(256)),
}
PIECE_FRAMES = [k for k in FRAMES if not k.endswith(".path")]
STREAM = (
    b"HDPROBE1 n\n"
    + b"".join(_frame(k, v) for k, v in FRAMES.items())
    + b"".join(_frame(f"trunc.{k}", b"") for k in PIECE_FRAMES)
    + b"HD1 end 0\n"
)


def _collected() -> NodeEvidence:
    reader = FrameReader("n", frame_cap=1 << 20, total_cap=1 << 20)
    reader.feed(STREAM)
    assert reader.ended
    return evidence_from_frames("gpu-3", reader)


def test_every_frame_the_probe_sends_has_a_row():
    for key in PIECE_FRAMES:
        assert kinds.frame_piece(key, FRAMES) is not None, key
    assert {kinds.frame_piece(k, FRAMES)[0] for k in PIECE_FRAMES} == set(kinds.KINDS)
    for key in ("hostname", "trunc.ps", "log.1.path", "log.2", "env.x", "unknown"):
        assert kinds.frame_piece(key, FRAMES) is None, key


def test_a_piece_cut_on_the_node_is_stored_as_cut():
    evidence = _collected()
    assert len(evidence.truncated) == len(PIECE_FRAMES)
    stored = list(artifacts_from_evidence(evidence))
    pieces = [(name, cut) for name, _content, cut in stored if name != "node.json"]
    assert len(pieces) == len(PIECE_FRAMES)
    assert all(cut for _name, cut in pieces), [n for n, cut in pieces if not cut]
    assert sorted(name for name, _ in pieces) == [
        "dmesg.txt",
        "environ/42",
        "flight_recorder//var/log/fr/trace_rank_3",
        "logs//var/log/train/rank3.log",
        "ncclras.txt",
        "nvidia-smi.txt",
        "ps.txt",
        "pyspy/42.json",
        "pyspy/42.samples",
        "pyspy/43.error",
        "shell-init.txt",
        "system/loadavg",
    ]


def test_stored_and_bundled_evidence_read_back_as_collected():
    evidence = _collected()
    stored = evidence_from_artifacts("gpu-3", artifacts_from_evidence(evidence))
    bundled = read_bundle_bytes(write_bundle(SnapshotEvidence(nodes=[evidence]))).nodes[0]
    for copy in (stored, bundled):
        for kind in kinds.KINDS:
            # The log's undecodable byte came in as the text \xff and stays so.
            assert getattr(copy, kind.field) == getattr(evidence, kind.field), kind.field
        assert copy.truncated == evidence.truncated


def test_a_bundle_lays_logs_and_dumps_out_under_their_remote_path():
    data = write_bundle(SnapshotEvidence(nodes=[_collected()]))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
    assert "gpu-3/logs/var/log/train/rank3.log" in names
    assert "gpu-3/flight_recorder/var/log/fr/trace_rank_3" in names
    assert "gpu-3/environ/42" in names
    for name in ("logs//var/log/x.log", "logs/rank0.log", "environ/7", "ps.txt"):
        assert kinds.artifact_name_of_bundle_path(kinds.bundle_path(name)) == name


def test_names_it_does_not_know_are_left_alone():
    for name in ("pyspy/x.json", "environ/abc", "logs/", "notes.txt", "system"):
        assert kinds.artifact_piece(name) is None, name
    evidence = evidence_from_artifacts("n", [("notes.txt", b"hello", False)])
    assert evidence == NodeEvidence(node="n")
