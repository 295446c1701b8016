"""The cluster page's step chart, built as data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from watch.figures import MAX_POINTS, step_progress_figure

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def test_it_plots_the_last_hour_of_steps_and_marks_raises():
    samples = [(NOW - timedelta(minutes=m), 1000 - m) for m in range(90, -1, -1)]
    raised = NOW - timedelta(minutes=5)
    figure = step_progress_figure(samples, now=NOW, raises=[raised, NOW - timedelta(hours=3)])
    steps = figure["data"][0]
    assert steps["y"][0] == 940 and steps["y"][-1] == 1000  # 60 minutes back, then now
    assert len(steps["x"]) == 61 and steps["x"] == sorted(steps["x"])
    assert figure["data"][1]["x"] == ["2026-11-30 09:55:00.000"]  # the old raise is not shown
    window = figure["layout"]["xaxis"]["range"]
    assert window == ["2026-11-30 09:00:00.000", "2026-11-30 10:00:00.000"]


def test_times_are_utc_without_an_offset_for_plotly():
    from zoneinfo import ZoneInfo

    paris = datetime(2026, 11, 30, 11, 0, tzinfo=ZoneInfo("Europe/Paris"))
    figure = step_progress_figure([(paris, 5)], now=NOW)
    assert figure["data"][0]["x"] == ["2026-11-30 10:00:00.000"]


def test_no_samples_is_an_empty_series():
    figure = step_progress_figure([], now=NOW)
    assert figure["data"][0]["x"] == [] and len(figure["data"]) == 1


def test_long_series_are_thinned_keeping_the_last_point():
    samples = [(NOW - timedelta(seconds=s), 5000 - s) for s in range(3600)]
    steps = step_progress_figure(samples, now=NOW)["data"][0]
    assert len(steps["y"]) == MAX_POINTS and steps["y"][-1] == 5000
