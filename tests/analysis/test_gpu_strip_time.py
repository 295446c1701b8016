"""What the page's GPU strip shows of each series (`gpushape.rows`): cells of time over a window
common to one source's rows, each cell the newest point inside it, an empty cell "no reading".
A series that stopped early ends in empty cells beside ranks still reporting; a steady or
jittery series shows no empty cell between its points; the newest point is always kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from analysis import gpucells, gpushape
from analysis.gpushape import GpuSeries, Point

END = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def _series(offsets_s: list[float], utils: list[int | None], node: str = "n0", gpu: int = 0,
            source: str = "dcgm") -> GpuSeries:  # fmt: skip
    """A series whose points sit `offsets_s` seconds before END, oldest first."""
    points = [Point(END - timedelta(seconds=o), u) for o, u in zip(offsets_s, utils, strict=True)]
    return GpuSeries(node, gpu, f"GPU-{node}-{gpu}", source, points)


def _cells(*series: GpuSeries) -> dict[int, tuple[int | None, ...]]:
    return {row.rank: row.util for row in gpushape.rows({r: (s, "LOCAL_RANK") for r, s in
                                                         enumerate(series)})}  # fmt: skip


def test_a_steady_series_shorter_than_the_strip_shows_every_point_in_order():
    utils = [(7 * i) % 101 for i in range(40)]
    cells = _cells(_series([5.0 * (39 - i) for i in range(40)], utils))
    assert cells[0] == tuple(utils)


def test_a_series_that_stopped_early_ends_in_no_reading_beside_one_still_reporting():
    # An hour at 30 s; rank 1's exporter went quiet 20 minutes before the snapshot.
    live = _series([30.0 * (119 - i) for i in range(120)], [100] * 120, gpu=0)
    stopped_at = [30.0 * (119 - i) for i in range(80)]  # the last 1,200 s before END
    stopped = _series(stopped_at, [0] * 80, gpu=1)
    cells = _cells(live, stopped)
    assert len(cells[0]) == len(cells[1]) == gpushape.SHOWN_POINTS  # one window, aligned
    assert cells[0][-1] == 100 and None not in cells[0]
    trailing = len(cells[1]) - len(tuple(c for c in cells[1] if c is not None))
    width = 3570 / (gpushape.SHOWN_POINTS - 1)
    assert trailing == round(1200 / width) and cells[1][-trailing - 1] == 0
    assert set(cells[1][-trailing:]) == {None}
    strip = gpushape.strip(gpushape.rows({0: (live, "pid"), 1: (stopped, "pid")}))
    assert strip["rows"][1]["cells"][-1]["title"] == "no reading"


def test_jitter_invents_no_gap_between_points_and_a_real_stall_shows():
    # Scrapes every 15 s give or take 4 s, two series with their own phase, one with a stall.
    jitter = [0, 4, -3, 2, -4, 1, 3, -2]
    base = [15.0 * (199 - i) + jitter[i % 8] for i in range(200)]
    other = [s + 7 for s in base]
    stall = [s for s in base if not 600 < s < 900]  # 300 s with nothing: a stall
    cells = _cells(_series(base, [50] * 200, gpu=0), _series(other, [60] * 200, gpu=1),
                   _series(stall, [70] * len(stall), gpu=2))  # fmt: skip
    for rank in (0, 1):
        assert None not in cells[rank] and len(cells[rank]) >= 50
    assert None in cells[2] and cells[2][-1] == 70


def test_the_newest_point_is_the_last_cell_however_the_stride_falls():
    utils = [0] * 718 + [37, 99]
    cells = _cells(_series([5.0 * (719 - i) for i in range(720)], utils))
    assert len(cells[0]) <= gpushape.SHOWN_POINTS and cells[0][-1] == 99


def test_points_without_times_are_thinned_by_count_keeping_the_newest():
    points = [Point(None, i % 100) for i in range(719)]
    cells = _cells(GpuSeries("n0", 0, "", "nvidia-smi", points))
    assert len(cells[0]) == gpushape.SHOWN_POINTS and cells[0][-1] == 718 % 100
    assert cells[0][-2] == (718 - 12) % 100  # every 12th, counted back from the newest


def test_nvidia_smi_samples_are_windowed_per_node_whose_clock_stamped_them():
    # Node n1's clock runs an hour behind: its samples are not "an hour old" beside n0's.
    n0 = _series([0.2 * (9 - i) for i in range(10)], [100] * 10, "n0", source="nvidia-smi")
    n1 = _series([3600 + 0.2 * (9 - i) for i in range(10)], [0] * 10, "n1", source="nvidia-smi")
    cells = _cells(n0, n1)
    assert cells == {0: (100,) * 10, 1: (0,) * 10}


def test_a_huge_series_is_read_only_from_its_tail():
    class TailOnly(list):
        def __iter__(self):  # reading the whole series would pass through here
            raise AssertionError("the strip read the whole series")

    points = TailOnly(Point(END - timedelta(seconds=1_000_000 - i), i % 100)
                      for i in range(1_000_000))  # fmt: skip
    shown = gpucells.shown_util([GpuSeries("n0", 0, "u", "dcgm", points)], gpushape.MAX_POINTS)
    cells, cell_s = next(iter(shown.values()))
    assert len(cells) == gpushape.SHOWN_POINTS and cells[-1] == 999_999 % 100
    assert cell_s is not None and cell_s >= 1.0


def test_the_strip_says_what_a_cell_spans():
    """A steady minute-by-minute hour: a cell is a minute; the rows keep it through the
    diagnosis JSON."""
    rows = gpushape.rows({0: (_series([60.0 * (59 - i) for i in range(60)], [100] * 60), "pid")})
    assert rows[0].cell_s == 60.0
    assert gpushape.GpuRow.from_json(rows[0].to_json()) == rows[0]
    assert gpushape.strip(rows)["cell_span"] == "1 min"


def test_points_without_times_are_counted_and_the_strip_says_points():
    rows = gpushape.rows({0: (GpuSeries("n0", 0, "u", "dcgm", [Point(None, 50)] * 5), "pid")})
    assert rows[0].cell_s is None
    strip = gpushape.strip(rows)
    assert strip["cell_span"] == "" and strip["points"] == 5


def test_nodes_sampled_at_their_own_pace_give_a_range():
    fast = _series([2.0 * (9 - i) for i in range(10)], [100] * 10, node="n0", source="nvidia-smi")
    slow = _series([30.0 * (9 - i) for i in range(10)], [0] * 10, node="n1", source="nvidia-smi")
    rows = gpushape.rows({0: (fast, "pid"), 1: (slow, "pid")})
    assert gpushape.strip(rows)["cell_span"] == "2 s to 30 s"


def test_a_stored_row_from_before_has_no_span_and_a_bad_one_is_dropped():
    row = gpushape.GpuRow(rank=0, node="n", gpu=0, source="dcgm", reading="spin").to_json()
    del row["cell_s"]
    assert gpushape.GpuRow.from_json(row).cell_s is None
    for bad in (-5, 0, "1e999", float("inf"), "a minute"):
        assert gpushape.GpuRow.from_json({**row, "cell_s": bad}).cell_s is None
