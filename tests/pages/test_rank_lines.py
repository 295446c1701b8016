"""A rank's page shows every line the snapshot holds about it, each with its source, and lines
older than the job marked (issue 19: "Rank 3's log tail" showed only its own log, and the
dmesg beside it an earlier run's OOM kill with nothing to tell it apart)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from analysis.ranklines import Rank, Text, lines_about
from collectors.evidence_viewer import render_lines
from collectors.models import Artifact
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.services import incident_open
from tests.analysis.sample_evidence import drop_rank_process, load_snapshot, pid_of_rank

START = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
LAUNCHER = (
    "2026-11-29 09:14:00 started rank 3 (local_rank 3) pid 4711\n"
    "2026-11-29 09:14:00 started rank 2 (local_rank 2) pid 4710\n"
    "2026-11-29 09:23:40 rank 3 (pid 4711) exited with exitcode 137 (signal 9)\n"
)


def _ctime(at: datetime) -> str:
    return at.strftime("[%a %b %d %H:%M:%S %Y]")


def test_the_lines_about_a_rank_come_from_the_launcher_and_the_kernel_by_pid():
    old = START - timedelta(days=3)
    dmesg = (
        f"{_ctime(old)} Out of memory: Killed process 4711 (python) total-vm:1kB\n"
        f"{_ctime(START + timedelta(minutes=23))} Out of memory: Killed process 4711 (python)\n"
        f"{_ctime(START + timedelta(minutes=23))} Out of memory: Killed process 999 (python)\n"
    )
    who = Rank(rank=3, node="n1", local_rank=3)
    found = lines_about(
        who,
        [Text("dmesg.txt", dmesg, 1, kernel=True), Text("logs//l/launcher.log", LAUNCHER, 40)],
        job_started=START,
    )
    assert who.pids == {4711}  # learnt from the launcher's lines about rank 3
    launcher = [f for f in found if f.source == "logs//l/launcher.log"]
    assert [(f.number, f.why) for f in launcher] == [(40, "names rank 3"), (42, "names rank 3")]
    assert launcher[1].kind == "killed"
    kernel = [f for f in found if f.source == "dmesg.txt"]
    assert [(f.number, f.before_job, f.kind) for f in kernel] == [
        (1, True, "oom"),
        (2, False, "oom"),
    ]


def test_the_viewer_marks_lines_from_before_the_job():
    text = f"{_ctime(START - timedelta(days=1))} old\n{_ctime(START)} new\n[123.4] no wall time\n"
    page = render_lines(text, [], job_started=START)
    assert page.before_job == 1
    assert '<tr id="L1" class="before-job"' in page.rows
    assert '<tr id="L2">' in page.rows and '<tr id="L3">' in page.rows
    assert render_lines(text, []).before_job == 0  # no known start: nothing is called old


@pytest.mark.django_db
def test_the_rank_page_shows_its_launcher_lines_kernel_lines_and_marks_old_ones(
    as_user, bob, cluster, django_capture_on_commit_callbacks
):
    before = load_snapshot("outside")
    pid = pid_of_rank(before.nodes[0], 3)
    evidence = drop_rank_process(before, 3)
    node = evidence.nodes[0]
    during = node.collected_at - timedelta(seconds=30)
    node.logs["/var/log/train/launcher.log"] = (
        f"{during:%Y-%m-%d %H:%M:%S} rank 3 (pid {pid}) exited with exitcode 137 (signal 9)\n"
    )
    node.dmesg = (
        f"{_ctime(during - timedelta(days=2))} Out of memory: Killed process {pid} (python)\n"
        f"{_ctime(during)} Memory cgroup out of memory: Killed process {pid} (python)\n"
    )
    incident = incident_open(opened_by=bob, title="rank 3 left", cluster=cluster)
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=evidence)
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    client = as_user(bob)
    html = client.get(f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/ranks/3/").content.decode()

    about = html.split('id="rank-about"', 1)[1].split("</section>", 1)[0]
    assert "launcher.log" in about and "exited with exitcode 137 (signal 9)" in about
    assert '<span class="ev-kind">killed</span>' in about
    kernel = html.split('id="rank-kernel"', 1)[1].split("</section>", 1)[0]
    assert kernel.count("Killed process") == 2
    assert re.search(r'<li class="before-job">.*?Out of memory: Killed', kernel, re.S)
    assert re.search(r'<li class="">.*?Memory cgroup out of memory', kernel, re.S)
    own = html.split('id="rank-log"', 1)[1].split("</section>", 1)[0]
    assert "rank3.log" in own
    dmesg = Artifact.objects.get(collection__snapshot=snapshot, name="dmesg.txt")
    assert f"/snapshots/{snapshot.pk}/artifacts/{dmesg.pk}/view/#L1" in kernel
    # The viewer tells the old kill apart too.
    viewer = client.get(f"/snapshots/{snapshot.pk}/artifacts/{dmesg.pk}/view/").content.decode()
    assert 'id="before-job-note"' in viewer and '<tr id="L1" class="before-job"' in viewer
    assert '<tr id="L2" class="quoted"' in viewer  # the kill of this job, quoted
