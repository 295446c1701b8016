"""The probe's framing read back locally: split anywhere, capped, noise-tolerant."""

from __future__ import annotations

from analysis.evidence import stopped_short
from hangdesk.frames import FrameReader, evidence_from_frames, parse_probe_output


def _frame(key: str, body: bytes) -> bytes:
    return b"HD1 %s %d\n" % (key.encode(), len(body)) + body


BINARY = bytes(range(256)) * 3
STREAM = (
    b"Welcome to gpu-3! (echoed by a chatty .bashrc)\n"
    + b"HDPROBE1 abc\n"
    + _frame("hostname", b"gpu-3")
    + _frame("env.42", b"RANK=3\0NCCL_DEBUG=INFO\0")
    + _frame("fr.1.path", b"/var/log/fr/trace_rank_3")
    + _frame("fr.1", BINARY)
    + _frame("log.1.path", b"/var/log/train/rank3.log")
    + _frame("log.1", b"step=1 \xff\n")
    + _frame("trunc.log.1", b"")
    + b"HD1 end 0\n"
)


def _read(chunks: list[bytes], **caps) -> FrameReader:
    reader = FrameReader("abc", frame_cap=caps.get("frame_cap", 10_000), total_cap=10_000)
    for chunk in chunks:
        reader.feed(chunk)
    return reader


def test_it_reads_the_same_frames_however_the_stream_is_split():
    whole = _read([STREAM])
    assert whole.ended and whole.error is None
    for size in (1, 2, 3, 7, 64):
        pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
        assert _read(pieces).frames == whole.frames


def test_it_maps_frames_onto_evidence_and_ignores_output_before_the_marker():
    evidence = evidence_from_frames("gpu-3", _read([STREAM]))
    assert evidence.hostname == "gpu-3"
    assert evidence.environ == {42: b"RANK=3\0NCCL_DEBUG=INFO\0"}
    assert evidence.flight_recorder == {"/var/log/fr/trace_rank_3": BINARY}
    assert evidence.logs == {"/var/log/train/rank3.log": "step=1 \\xff\n"}
    assert evidence.truncated == ["logs:/var/log/train/rank3.log"]
    assert "chatty .bashrc" in evidence.system["output before probe"]


def test_it_cuts_a_frame_larger_than_the_cap():
    reader = _read([STREAM], frame_cap=100)
    assert reader.frames["fr.1"] == BINARY[:100]
    assert reader.frames["hostname"] == b"gpu-3"  # later frames still line up
    assert reader.ended
    assert "flight_recorder:/var/log/fr/trace_rank_3" in evidence_from_frames("n", reader).truncated


def test_it_stops_at_a_malformed_header():
    reader = _read([b"HDPROBE1 abc\n", _frame("hostname", b"h"), b"HD1 ../etc/passwd 5\nxxxxx"])
    assert reader.frames == {"hostname": b"h"}
    assert reader.error == "malformed probe output (bad frame header)"


def test_it_counts_every_byte_against_the_total_cap():
    reader = FrameReader("abc", frame_cap=10_000, total_cap=50)
    reader.feed(STREAM)
    assert reader.over_cap


def test_a_stream_without_end_is_partial():
    evidence = parse_probe_output("n", STREAM[: STREAM.index(b"HD1 log.1 ")], nonce="abc")
    assert evidence.status == stopped_short("probe output ended early")
    assert evidence.hostname == "gpu-3"


def test_the_output_before_the_marker_is_kept_the_same_however_it_is_split():
    # The marker found in the read that holds it (no copy of that read), or across reads.
    noisy = b"motd line\n" * 2000 + STREAM  # 20 KB of noise: more than the 16 KiB kept
    readers = []
    for size in (len(noisy), 7_000, 4_096, 13):
        reader = FrameReader("abc", frame_cap=10_000, total_cap=100_000)
        for i in range(0, len(noisy), size):
            reader.feed(noisy[i : i + size])
        readers.append(reader)
    whole = readers[0]
    assert whole.ended and whole.frames["hostname"] == b"gpu-3"
    assert len(whole.noise) == 16 * 1024 and whole.noise.startswith(b"motd line\n")
    for reader in readers[1:]:
        assert reader.frames == whole.frames
        assert (reader.noise, reader.total) == (whole.noise, whole.total)
