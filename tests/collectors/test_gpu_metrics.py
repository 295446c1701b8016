"""The GPU's hour from a real Prometheus: Debian's `prometheus`, started here on loopback with its
own config and data folder (stopped by its pid), scrapes a loopback endpoint serving recorded
DCGM exporter text (dcgm_exporter.txt: the labels and format of NVIDIA/dcgm-exporter issue #250's
V100 node r6i3n0, three GPUs at 100 % and one idle with its memory held). The console queries
it through the egress policy (purpose "metrics"), stores each node's series with its evidence,
and the analysis reads the shape: split rank states, the idle rank the suspect."""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import threading
import time
import urllib.request
from dataclasses import replace
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import pytest

from collectors import gpumetrics
from collectors.models import Artifact, Snapshot
from collectors.selectors import snapshot_evidence
from collectors.services import snapshot_analyse, snapshot_store_bundle
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot
from tests.helpers import free_port, wait_for

PROMETHEUS = Path("/usr/bin/prometheus")
EXPORTER_TEXT = (Path(__file__).with_name("dcgm_exporter.txt")).read_bytes()

pytestmark = pytest.mark.django_db


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(EXPORTER_TEXT)))
        self.end_headers()
        self.wfile.write(EXPORTER_TEXT)

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def _exporter():
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Exporter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - loopback
        return json.load(answer)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    if not PROMETHEUS.exists():
        pytest.fail("Debian's prometheus is needed (scripts/system-packages installs it)")
    folder = tmp_path_factory.mktemp("prometheus")
    with _exporter() as target:
        config = folder / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
            f"  - job_name: dcgm\n    static_configs:\n      - targets: ['{target}']\n"
        )
        port = free_port()
        process = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=(folder / "prometheus.log").open("w"),
            start_new_session=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            # Ready, and holding a few seconds of every GPU's series.
            wait_for(lambda: _scraped(base) >= 4, timeout=60, what="prometheus's first scrapes")
            time.sleep(4)
            yield base
        finally:
            process.terminate()  # our own child, by its pid
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _seconds_held(base: str) -> float:
    """How long ago Prometheus's oldest held GPU sample was scraped."""
    query = "min(time() - min_over_time(timestamp(DCGM_FI_DEV_GPU_UTIL)[1m:1s]))"
    try:
        result = _get(f"{base}/api/v1/query?{urlencode({'query': query})}")["data"]["result"]
    except (OSError, KeyError):
        return 0.0
    return float(result[0]["value"][1]) if result else 0.0


def _scraped(base: str) -> int:
    try:
        answer = _get(f"{base}/api/v1/query?query=count(DCGM_FI_DEV_GPU_UTIL)")
    except OSError:
        return 0
    result = answer.get("data", {}).get("result", [])
    return int(float(result[0]["value"][1])) if result else 0


@pytest.fixture
def short_window(settings):
    settings.GPU_METRICS_WINDOW_S = 30
    settings.GPU_METRICS_STEP_S = 1


def _snapshot(bob, cluster, prometheus_url: str) -> Snapshot:
    cluster.prometheus_url = prometheus_url
    cluster.save()
    incident = incident_open(opened_by=bob, title="stuck", cluster=cluster, severity="SEV1")
    sample = load_snapshot("outside")  # four ranks, LOCAL_RANK 0-3; their stacks left out
    node = replace(sample.nodes[0], node="r6i3n0", hostname="r6i3n0", pyspy={})
    evidence = replace(sample, nodes=[node], collected_at=None)
    return snapshot_store_bundle(incident=incident, evidence=evidence, by=bob)


def test_the_console_reads_the_hour_from_prometheus_and_the_shape_decides(
    prometheus, short_window, bob, cluster, as_user
):
    snapshot = _snapshot(bob, cluster, prometheus)
    assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot.pk) == 1
    stored = Artifact.objects.get(collection__snapshot=snapshot, name="system/dcgm")
    series = json.loads(stored.content)["series"]
    assert {s["metric"] for s in series} == {
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
    }  # fmt: skip
    utils = [s for s in series if s["metric"] == "DCGM_FI_DEV_GPU_UTIL"]
    assert sorted(s["gpu"] for s in utils) == ["0", "1", "2", "3"]
    assert all(len(s["values"]) >= 3 for s in utils)  # a second apart, as scraped
    assert "system/dcgm" in {a for a in snapshot_evidence_names(snapshot)}

    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    diagnosis = snapshot.diagnosis
    strip = {row["rank"]: row for row in diagnosis["gpu_shape"]}
    assert {row["source"] for row in strip.values()} == {"dcgm"}
    assert [strip[r]["reading"] for r in range(4)] == ["spin", "spin", "spin", "idle"]
    assert 3 in diagnosis["suspect_ranks"]
    assert any(f["rule"] == "gpu_split" for f in diagnosis["findings"])
    # The page draws the strip on the server: an SVG, no script (the CSP allows no inline one).
    page = as_user(bob).get(snapshot.incident.get_absolute_url()).content.decode()
    figure = page.split('<figure class="gpu-strip"', 1)[1].split("</figure>", 1)[0]
    assert figure.count('class="gpu-row reading-spin"') == 3
    assert figure.count('class="gpu-row reading-idle"') == 1
    assert 'class="gpu-cell u3"' in figure and 'class="gpu-cell u0"' in figure
    assert "<script" not in figure and "style=" not in figure
    assert "a cell = " in figure  # its cells are slices of time, and it says how long
    events = list(snapshot.incident.events.values_list("summary", flat=True))
    assert f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour before the snapshot " \
           "at 1 s steps for 1 of 1 nodes" in events  # fmt: skip


def snapshot_evidence_names(snapshot) -> set[str]:
    evidence = snapshot_evidence(snapshot)
    return {f"system/{name}" for node in evidence.nodes for name in node.system}


def test_the_default_policy_keeps_metrics_queries_off_loopback(settings, bob, cluster):
    settings.EGRESS_ALLOW = []  # the default: "metrics" reaches public addresses only
    snapshot = _snapshot(bob, cluster, "http://example.com:9090")
    cluster.prometheus_url = "http://127.0.0.1:9090"
    cluster.save(update_fields=["prometheus_url"])
    assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot.pk) == 0
    summaries = snapshot.incident.events.values_list("summary", flat=True)
    assert f"Snapshot {snapshot.pk}: GPU metrics from Prometheus not read: refused by policy" in (
        summaries
    )


def test_a_fleet_past_the_budget_reads_the_hour_coarser_and_its_last_seconds_fine(
    prometheus, short_window, bob, cluster, monkeypatch
):
    # The budget cut to what one node's 30 s at 1 s steps passes, and "the last minutes" to 3 s:
    # the same two queries a 1,000-node fleet's hour asks (the coarse Xid as max_over_time).
    monkeypatch.setattr(gpumetrics, "POINTS_BUDGET", 500)
    monkeypatch.setattr(gpumetrics, "RECENT_S", 3.0)
    wait_for(lambda: _seconds_held(prometheus) >= 15, timeout=60, what="15 s of series")
    snapshot = _snapshot(bob, cluster, prometheus)
    assert gpumetrics.snapshot_gpu_metrics_store(snapshot_id=snapshot.pk) == 1
    stored = json.loads(
        Artifact.objects.get(collection__snapshot=snapshot, name="system/dcgm").content
    )
    assert (stored["step_s"], stored["recent_step_s"]) == (3, 1)
    series = {(s["metric"], s["gpu"]): s["values"] for s in stored["series"]}
    assert {m for m, _ in series} == set(gpumetrics.DCGM_METRICS)  # max_over_time answered
    # (the query's times are sent to the millisecond; the coarse part ends a second before)
    recent_start = round(datetime.fromisoformat(stored["recent_start"]).timestamp(), 3) - 0.01
    times = [t for t, _ in series[("DCGM_FI_DEV_GPU_UTIL", "3")]]
    fine = [t for t in times if t >= recent_start]
    coarse = [t for t in times if t < recent_start]
    assert len(fine) == 4 and {b - a for a, b in itertools.pairwise(fine)} == {1}
    assert coarse
    assert {b - a for a, b in itertools.pairwise(coarse)} <= {3}
    assert times == sorted(times)
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    readings = {row["rank"]: row["reading"] for row in snapshot.diagnosis["gpu_shape"]}
    assert [readings[r] for r in range(4)] == ["spin", "spin", "spin", "idle"]
    events = list(snapshot.incident.events.values_list("summary", flat=True))
    assert f"Snapshot {snapshot.pk}: GPU metrics from Prometheus: the hour before the snapshot " \
           "at 3 s steps, its last 3 s at 1 s for 1 of 1 nodes" in events  # fmt: skip
