"""Frames the probe gzips on the node (HD_ZIP): read back as the plain ones, inflated within the
reader's caps whatever the node sends, kept as zlib streams to be stored as they came; and the
probe on a node without gzip sends them plain."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import zlib
from pathlib import Path

from collectors.node_work import artifact_rows
from hangdesk.frames import FrameReader, evidence_from_frames, parse_probe_output, render_probe
from hangdesk.plan import CollectionPlan

CAP = 64 * 1024


def _gz(key: str, body: bytes, member: bytes | None = None, size: int | None = None) -> bytes:
    member = gzip.compress(body, 1, mtime=0) if member is None else member
    declared = len(body) if size is None else size
    return b"HD1 %s %d gz %d\n" % (key.encode(), declared, len(member)) + member


def _plain(key: str, body: bytes) -> bytes:
    return b"HD1 %s %d\n" % (key.encode(), len(body)) + body


def _read(stream: bytes, *, chunk: int = 4096, frame_cap: int = CAP, total_cap: int = 4 * CAP):
    reader = FrameReader("n", frame_cap=frame_cap, total_cap=total_cap)
    for at in range(0, len(stream), chunk):
        reader.feed(stream[at : at + chunk])
        if reader.over_cap or reader.error:
            break
    return reader


LOG = b"".join(b"[rank%d] step %d loss 2.%03d\n" % (i % 8, i, i % 997) for i in range(2000))
DUMP = bytes(range(256)) * 40


def test_gzipped_frames_read_back_as_the_plain_ones_however_split():
    plain = b"HDPROBE1 n\n" + _plain("log.1", LOG) + _plain("fr.1", DUMP) + b"HD1 end 0\n"
    packed = b"HDPROBE1 n\n" + _gz("log.1", LOG) + _gz("fr.1", DUMP) + b"HD1 end 0\n"
    want = _read(plain).frames
    for chunk in (1, 7, 100, 4096, len(packed)):
        reader = _read(packed, chunk=chunk)
        assert reader.ended and reader.error is None
        assert reader.frames == want
        for body in want.values():
            assert zlib.decompress(reader.packed.find(body)) == body


def test_a_decompression_bomb_is_cut_at_the_frame_cap_and_the_total_is_bounded():
    bomb = gzip.compress(bytes(64 * 1024 * 1024), 9, mtime=0)  # 64 MiB of zeros in ~64 KB
    one = _read(b"HDPROBE1 n\n" + _gz("log.1", b"", bomb, size=10) + b"HD1 end 0\n")
    assert one.error is None and one.ended
    assert one.frames["log.1"] == bytes(CAP) and "log.1" in one.cut
    assert one.unpacked <= CAP + 1
    assert one.packed.find(bytes(CAP)) is None  # cut: never stored as the node's stream

    many = b"HDPROBE1 n\n" + b"".join(_gz(f"log.{i}", b"", bomb, size=10) for i in range(50))
    reader = _read(many, chunk=len(many))  # every bomb in one read
    assert reader.over_cap
    assert reader.unpacked <= 4 * CAP + CAP + 1
    assert len(reader.frames) <= 5


def test_a_bad_or_short_compressed_frame_stops_the_reading_with_a_reason():
    member = gzip.compress(LOG, 1, mtime=0)
    garbage = _read(b"HDPROBE1 n\n" + _gz("log.1", LOG, b"\x1f\x8b\x08\x00" + b"x" * 50))
    assert "compressed frame log.1" in garbage.error
    short = _read(b"HDPROBE1 n\n" + _gz("log.1", LOG, member[: len(member) // 2]) + b"HD1 end 0\n")
    assert short.error and "log.1" in short.error
    wrong_size = _read(b"HDPROBE1 n\n" + _gz("log.1", LOG, member, size=5) + b"HD1 end 0\n")
    assert wrong_size.error and "not whole" in wrong_size.error
    assert "log.1" not in wrong_size.frames


def test_a_member_with_a_name_is_read_but_compressed_again_for_storage():
    named = subprocess.run(["gzip", "-1", "-c"], input=LOG, capture_output=True, check=True)
    assert named.stdout[3] == 0  # from a pipe: no name; give it one as gzip does for a file
    member = gzip.compress(LOG, 1, mtime=0)
    flagged = member[:3] + b"\x08" + member[4:10] + b"rank0.log\0" + member[10:]
    reader = _read(b"HDPROBE1 n\n" + _gz("log.1", LOG, flagged) + b"HD1 end 0\n")
    assert reader.error is None and reader.frames["log.1"] == LOG
    assert reader.packed.find(LOG) is None


def test_stored_rows_take_the_nodes_stream_and_compress_the_rest():
    stream = b"HDPROBE1 n\n" + _plain("hostname", b"gpu-0") + _plain("log.1.path", b"/l/0.log")
    stream += _gz("log.1", LOG) + b"HD1 end 0\n"
    reader = _read(stream)
    evidence = evidence_from_frames("gpu-0", reader)
    rows = {name: (compressed, size) for _, name, compressed, size, _ in artifact_rows(
        7, evidence, reader.packed)}  # fmt: skip
    node_stream = reader.packed.find(LOG)
    assert rows["logs//l/0.log"] == (node_stream, len(LOG))
    for compressed, size in rows.values():
        assert len(zlib.decompress(compressed)) == size


# --- the probe itself, on this machine ------------------------------------------------------


def _probe(tmp_path: Path, path: str, *, packed: bool) -> bytes:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    (logs / "rank0.log").write_bytes(LOG)
    (logs / "small.log").write_bytes(b"one line\n")
    plan = CollectionPlan(
        process_pattern="no-such-process-xyz", log_globs=[f"{logs}/*.log"],
        flight_recorder_globs=[], sample_seconds=0, gpu_window_s=0,
    )  # fmt: skip
    result = subprocess.run(
        ["sh", "-s"],
        input=render_probe(plan, packed=packed),
        capture_output=True,
        env={"PATH": path, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _logs(output: bytes) -> dict[str, str]:
    return parse_probe_output("n", output).logs


def test_the_probe_gzips_its_bigger_frames_when_asked(tmp_path):
    packed = _probe(tmp_path, os.environ["PATH"], packed=True)
    plain = _probe(tmp_path, os.environ["PATH"], packed=False)
    assert re.search(rb"HD1 log\.\d+ %d gz \d+\n" % len(LOG), packed)
    assert re.search(rb"HD1 log\.\d+ 9\n", packed)  # small: plain
    assert b" gz " not in plain
    assert _logs(packed) == _logs(plain)
    assert len(packed) < len(plain) - len(LOG) // 2


def _path_without(tmp_path: Path, tool: str, broken: bool) -> str:
    """A PATH of every command here but `tool` (absent, or one that fails)."""
    bin_dir = tmp_path / f"bin-{broken}"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for entry in os.scandir(folder) if os.path.isdir(folder) else ():
            link = bin_dir / entry.name
            if entry.name != tool and not link.exists():
                link.symlink_to(entry.path)
    if broken:
        (bin_dir / tool).write_text("#!/bin/sh\necho 'gzip: cannot' >&2\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    return str(bin_dir)


def test_a_node_without_gzip_or_with_a_broken_one_sends_its_frames_plain(tmp_path):
    plain = _probe(tmp_path, os.environ["PATH"], packed=False)
    for broken in (False, True):
        output = _probe(tmp_path, _path_without(tmp_path, "gzip", broken), packed=True)
        assert b" gz " not in output
        assert _logs(output) == _logs(plain)
        assert parse_probe_output("n", output).status.note == ""


# --- over a real sshd -----------------------------------------------------------------------


def test_a_visit_over_ssh_gets_the_big_frames_gzipped_and_stores_them_as_they_came(
    sshd, ranks, tmp_path
):
    from collectors.visits import ssh_visit

    log = tmp_path / "rank0.log"
    log.write_bytes(LOG)
    visit = ssh_visit(sshd.target(), ranks.plan(log_globs=[str(tmp_path / "*.log")]))
    assert visit.failure is None
    assert visit.evidence.logs[str(log)] == LOG.decode()
    node_stream = visit.packed.find(LOG)
    assert node_stream is not None and zlib.decompress(node_stream) == LOG
    wire = int(re.search(r", (\d+) bytes,", visit.evidence.system["collection"]).group(1))
    stored = {name: z for _, name, z, _, _ in artifact_rows(1, visit.evidence, visit.packed)}
    assert stored[f"logs/{log}"] is node_stream
    assert wire < sum(len(zlib.decompress(z)) for z in stored.values())
