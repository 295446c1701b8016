"""NCCL RAS output (analysis.parsers.ncclras, analysis.signals.ras): the published samples of
NCCL's documentation and of NVIDIA/nccl issues, text and JSON (tests/analysis/samples/public/
ncclras/README.md says where each comes from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.parsers.ncclras import parse_ncclras
from analysis.signals import LineSource, read_text

SAMPLES = Path(__file__).parent / "samples" / "public" / "ncclras"


def _read(name: str) -> str:
    return (SAMPLES / name).read_text()


def _ras(name: str, source: LineSource | None = None):
    return [s for s in read_text(_read(name), source or LineSource(node="n0")) if s.kind == "ras"]


def test_a_dead_process_and_a_missing_rank_are_named_with_host_and_pid():
    report = parse_ncclras(_read("docs_dead_incomplete.txt"))
    assert report is not None and not report.ok
    assert report.format == "text" and report.world == 32 and report.timeouts == 2
    (dead,) = report.processes
    assert (dead.pid, dead.host, dead.dead) == (3487984, "172.16.64.213", True)
    (comm,) = report.comms
    assert comm.errors == ("INCOMPLETE",) and [m.rank for m in comm.ranks] == [21]
    signals = _ras("docs_dead_incomplete.txt", LineSource(pid_ranks={3487984: 21}))
    assert {(s.peer, s.node) for s in signals} == {(21, "172.16.64.213"), (21, None)}
    assert all(s.rank is None for s in signals)  # RAS reports; no rank of the job wrote it


def test_the_missing_rank_is_placed_through_its_pid_in_an_issue_s_output():
    signals = _ras("nccl_1762_incomplete.txt", LineSource(hosts={"10.4.109.13": "gpu-3"}))
    named = [s for s in signals if s.peer is not None]
    assert [(s.peer, s.node, s.pid) for s in named] == [(1, "gpu-3", 60004)]
    # the rank numbers a RAS bug corrupted (1057455228) are not believed
    assert all(s.peer is None or s.peer < 10 for s in signals)


def test_a_mismatch_names_only_the_ranks_behind():
    behind = _ras("docs_mismatch_behind.txt")
    assert sorted(s.peer for s in behind) == [0, 2, 3, 4, 5, 7]
    assert {s.node for s in behind} == {"172.16.64.210"}
    ahead = _ras("nccl_1911_mismatch_ahead.txt")  # the two listed are ahead of the thirty
    assert [s.peer for s in ahead] == [None]
    report = parse_ncclras(_read("nccl_1911_mismatch_ahead.txt"))
    assert report.version == "2.26.2"
    assert report.comms[0].op_counts == (("AllGather", 640, 30), ("AllGather", 641, 2))


def test_ok_while_the_job_is_stuck_is_a_signal_too():
    signals = read_text(_read("docs_ok.txt"), LineSource(node="n0"))
    assert [(s.kind, s.node) for s in signals] == [("ras_ok", "n0")]
    assert parse_ncclras(_read("docs_ok.txt")).ok


@pytest.mark.parametrize("name", ["docs_2_29.json", "docs_2_28_7_missing_comma.json"])
def test_json_names_the_missing_rank_even_when_nccl_forgot_a_comma(name):
    report = parse_ncclras(_read(name))
    assert report.format == "json" and report.world == 2
    (comm,) = report.comms
    assert [(m.rank, m.pid, m.missing) for m in comm.ranks] == [
        (0, 1524344, False),
        (1, 1524345, True),
    ]
    assert ("AllReduce", 0, 1) in comm.op_counts
    assert bool(report.problems) == ("2_28_7" in name)
    (signal,) = _ras(name)
    assert (signal.peer, signal.node, signal.pid) == (1, "172.16.64.245", 1524345)


def test_json_that_cannot_be_repaired_still_gives_its_missing_ranks():
    broken = _read("docs_2_29.json").replace('"ranks_count": 1,', '"ranks_count": 1,,')
    report = parse_ncclras(broken)
    assert [(m.rank, m.pid) for c in report.comms for m in c.ranks] == [(1, 1524345)]
    assert report.problems


def test_json_counts_apart_name_the_minority_behind_even_after_a_text_banner():
    data = json.loads(_read("docs_2_29.json"))
    comm = data["communicators"][0]
    first = comm["ranks"][0]
    comm["ranks"] = [
        {**first, "rank": r, "pid": 100 + r, "collective_counts": {"AllReduce": n}}
        for r, n in ((0, 5), (1, 6), (2, 6))
    ]
    comm["size"], comm["missing_ranks"] = 3, []
    banner = "NCCL version 2.28.7 compiled with CUDA 13.0\n\n"
    report = parse_ncclras(banner + json.dumps(data, indent=2))
    (parsed,) = report.comms
    assert parsed.errors == ("MISMATCH",)
    assert [m.rank for m in parsed.ranks if m.behind] == [0]
    assert [s.peer for s in read_text(banner + json.dumps(data)) if s.kind == "ras"] == [0]


def test_a_report_nobody_can_read_is_none():
    assert parse_ncclras("") is None
    assert parse_ncclras("ncclras: Failed to connect to the NCCL RAS service!") is None
