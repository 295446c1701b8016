"""The GPU's shape: nvidia-smi's query output (rows from public reports) and DCGM series read into
per-GPU series, joined to ranks, read as the sources read them (100 % flat = NCCL spinning, 0 %
with memory held = the CPU side, split = a deadlock with split rank states), and spoken by the
rules only while nothing proves the job moves."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import analysis
from analysis import gpushape
from analysis.facts import build_facts
from analysis.rules.gpu import gpu_cpu_side, gpu_split
from analysis.snapshot_parse import parse_snapshot
from tests.analysis.sample_evidence import load_snapshot

# nvidia-smi --query-gpu=...,power.draw,clocks.gr,clocks.mem --format=csv, as a user pasted it
# (aristocratos/bpytop issue #26): units in the values, a GPU that works, one with nothing on it.
# ruff: noqa: E501 - the pasted output, line for line
PUBLIC_CSV = """\
name, fan.speed [%], memory.total [MiB], memory.used [MiB], utilization.gpu [%], temperature.gpu, power.draw [W], clocks.current.graphics [MHz], clocks.current.memory [MHz]
GeForce GTX 1080 Ti, 29 %, 11175 MiB, 2856 MiB, 36 %, 60, 106.56 W, 1936 MHz, 5508 MHz
GeForce GTX 1060 6GB, 29 %, 6078 MiB, 4 MiB, 0 %, 49, 5.68 W, 139 MHz, 405 MHz
"""
HEADER = (
    "timestamp, index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
    "power.draw [W], clocks.current.sm [MHz], ecc.errors.uncorrected.volatile.total"
)


def _loop(values: dict[int, list[int]], memory: int = 30_000) -> str:
    """What the probe's `--format=csv,nounits -lms 200` prints: the header once, then a row per
    GPU per sample, `[N/A]` where a field is not supported (ECC on this board)."""
    start = datetime(2026, 12, 1, 2, 13, 0)
    rows = [HEADER]
    for sample in range(len(next(iter(values.values())))):
        at = start + timedelta(milliseconds=200 * sample)
        for gpu, utils in values.items():
            rows.append(
                f"{at:%Y/%m/%d %H:%M:%S.%f}"[:-3] + f", {gpu}, GPU-{gpu:08x}-aaaa, "
                f"{utils[sample]}, {memory}, 81920, 312.45, 1410, [N/A]"
            )
    return "\n".join(rows) + "\n"


def test_the_public_csv_reads_as_two_gpus_one_busy_one_empty():
    series = gpushape.parse_samples("gpu-0", PUBLIC_CSV)
    assert [(s.points[0].util, s.points[0].memory_mib) for s in series] == [(36, 2856), (0, 4)]
    assert [s.reading for s in series] == ["busy", "empty"]
    assert series[0].points[0].power_w == 106.56


def test_a_sample_loop_reads_flat_spin_and_idle_with_memory_held():
    text = _loop({0: [100] * 10, 1: [0] * 10, 2: [100, 0, 97, 3, 100, 0, 99, 1, 100, 0]})
    by_gpu = {s.index: s for s in gpushape.parse_samples("gpu-0", text)}
    assert by_gpu[0].reading == "spin" and by_gpu[1].reading == "idle"
    assert by_gpu[2].reading == "busy"  # jumping between the two: working
    assert by_gpu[0].since() == datetime(2026, 12, 1, 2, 13, tzinfo=UTC)
    assert by_gpu[1].ecc_uncorrected is None and by_gpu[1].memory_total_mib == 81920


def _stackless(evidence, samples: str):
    node = evidence.nodes[0]
    node = replace(node, pyspy={}, system={**node.system, "nvidia-smi samples": samples})
    return replace(evidence, nodes=[node])


def test_split_gpus_name_the_idle_rank_when_no_stack_says_it():
    # The `outside` hang without its py-spy dumps: rank 3's GPU idles, the others spin.
    evidence = _stackless(load_snapshot("outside"), _loop({0: [100] * 8, 1: [99] * 8,
                                                           2: [100] * 8, 3: [0] * 8}))  # fmt: skip
    facts = build_facts(parse_snapshot(evidence))
    assert {r: how for r, (_, how) in facts.gpu.items()} == {r: "LOCAL_RANK" for r in range(4)}
    found = gpu_split(facts)
    assert found is not None and found.classification == "A" and found.suspects == (3,)
    assert "rank 3: GPU 3 on lab-node-0 at 0% holding 30000 MiB since 02:13:00 UTC" in (
        found.evidence[0].text
    )
    diagnosis = analysis.diagnose(evidence).to_json()
    assert 3 in diagnosis["suspect_ranks"]
    strip = {row["rank"]: row for row in diagnosis["gpu_shape"]}
    assert strip[3]["reading"] == "idle" and strip[0]["reading"] == "spin"
    assert strip[0]["util"] == [100] * 8 and strip[3]["since"] == "2026-12-01T02:13:00+00:00"


def test_the_gpu_rules_stay_silent_on_one_shape_or_on_a_moving_job():
    all_spin = _stackless(load_snapshot("outside"), _loop({g: [100] * 6 for g in range(4)}))
    facts = build_facts(parse_snapshot(all_spin))
    assert gpu_split(facts) is None and gpu_cpu_side(facts) is None
    all_idle = _stackless(load_snapshot("outside"), _loop({g: [0] * 6 for g in range(4)}))
    idle = build_facts(parse_snapshot(all_idle))
    assert gpu_cpu_side(idle).classification == "A" and gpu_cpu_side(idle).suspects == ()
    moving = replace(idle, progress=replace(idle.progress, progressing=True))
    assert gpu_split(moving) is None and gpu_cpu_side(moving) is None


def test_dcgm_series_join_by_gpu_and_tell_when_the_gpu_went_flat():
    base = 1_764_555_000
    stored = {
        "series": [
            {"metric": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "GPU-a6158b59",
             "values": [[base + 30 * i, "37" if i < 50 else "100"] for i in range(120)]},
            {"metric": "DCGM_FI_DEV_FB_USED", "gpu": "0", "UUID": "GPU-a6158b59",
             "values": [[base + 30 * i, "31566"] for i in range(120)]},
            {"metric": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "UUID": "GPU-a6158b59",
             "values": [[base + 30 * i, "0" if i < 100 else "79"] for i in range(120)]},
            {"metric": "NOT_A_DCGM_METRIC", "gpu": "0", "values": [[base, "5"]]},
            {"metric": "DCGM_FI_DEV_GPU_UTIL", "gpu": "1", "values": [["bad", "x"], [base]]},
        ]
    }  # fmt: skip
    series = {s.index: s for s in gpushape.parse_dcgm("r6i3n0", json.dumps(stored))}
    assert sorted(series) == [0]
    gpu = series[0]
    assert gpu.reading == "spin" and gpu.xid == 79 and gpu.memory_mib == 31566
    assert gpu.since() == datetime.fromtimestamp(base + 30 * 50, UTC)  # the onset of the flat
    rows = gpushape.rows({5: (gpu, "CUDA_VISIBLE_DEVICES")})
    assert len(rows[0].util) == 60 and rows[0].util[-1] == 100
    assert gpushape.GpuRow.from_json(rows[0].to_json()) == rows[0]


def test_a_stored_row_with_too_many_cells_keeps_the_newest():
    row = gpushape.GpuRow(rank=0, node="n", gpu=0, source="dcgm", reading="spin")
    data = {**row.to_json(), "util": list(range(gpushape.SHOWN_POINTS + 5))}
    util = gpushape.GpuRow.from_json(data).util
    assert len(util) == gpushape.SHOWN_POINTS and util[-1] == gpushape.SHOWN_POINTS + 4
