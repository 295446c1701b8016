"""The cluster page in a real browser: htmx loads the watch's panel and plotly draws the last
hour's steps from the figure the server built."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from watch import configure
from watch.models import StepSample, Watch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_cluster_page_shows_the_watch_and_its_chart(page, live_server, log_in, bob, cluster):
    watch = configure.watch_configure(
        cluster=cluster, by=bob, enabled=True, step_time_multiplier=5, floor_s=120,
        checkpoint_allowance_s=900,
    )  # fmt: skip
    now = timezone.now()
    Watch.objects.filter(pk=watch.pk).update(
        state="ok", state_reason="step 1200, 3 s ago", last_step=1200, step_time_s=4.2,
        threshold_s=120, checked_at=now, last_step_at=now - timedelta(seconds=3),
        nodes={"gpu-0": {"seen_at": now.isoformat(), "processes": 8, "steps": True,
                         "read_logs": True, "bytes": 17000, "seconds": 0.4, "error": ""},
               "gpu-1": {"seen_at": now.isoformat(), "processes": 8, "steps": False,
                         "read_logs": False, "bytes": 450, "seconds": 0.3, "error": ""}},
    )  # fmt: skip
    StepSample.objects.bulk_create(
        StepSample(watch=watch, at=now - timedelta(seconds=30 * i), step=1200 - 7 * i)
        for i in range(120)
    )
    log_in("bob")
    page.goto(f"{live_server.url}{cluster.get_absolute_url()}")
    page.wait_for_selector("#watch-panel >> text=Learned step time")
    page.wait_for_selector("#watch-step-chart.js-plotly-plot", timeout=30_000)
    # One marker per sample inside the window: plotly read every time on the x axis (it did
    # not while the times carried "+00:00").
    assert page.locator("#watch-step-chart path.point").count() >= 100
    text = page.inner_text("#watch-panel")
    assert "Progressing" in text and "4.20 s" in text and "120 s" in text
    assert "gpu-1" in text and "not read" in text
    shots = os.environ.get("HANGDESK_SCREENSHOTS")
    if shots:
        page.screenshot(path=os.path.join(shots, "watch-panel.png"), full_page=True)
