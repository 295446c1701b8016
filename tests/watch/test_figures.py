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
    assert figure["data"][1]["x"] == [raised.isoformat()]  # the old raise is out of the window
    assert figure["layout"]["xaxis"]["range"] == [
        (NOW - timedelta(hours=1)).isoformat(),
        NOW.isoformat(),
    ]


def test_no_samples_is_an_empty_series():
    figure = step_progress_figure([], now=NOW)
    assert figure["data"][0]["x"] == [] and len(figure["data"]) == 1


def test_long_series_are_thinned_keeping_the_last_point():
    samples = [(NOW - timedelta(seconds=s), 5000 - s) for s in range(3600)]
    steps = step_progress_figure(samples, now=NOW)["data"][0]
    assert len(steps["y"]) == MAX_POINTS and steps["y"][-1] == 5000
