"""The heartbeat endpoint (the cluster's own token, or a responder), the cluster page's watch
panel and settings, and `manage.py preflight`."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from analysis.evidence import NodeEvidence, SnapshotEvidence
from watch import configure, heartbeats, visits
from watch.models import Heartbeat, PreflightRun, Watch


def url(name: str) -> str:
    return reverse("api-watch-heartbeat", args=[name])


@pytest.fixture
def api():
    return APIClient()


def test_a_job_pushes_heartbeats_with_its_clusters_token(api, cluster):
    token = heartbeats.heartbeat_token_issue(watch=configure.watch_for(cluster))
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    first = api.post(url(cluster.name), {"step": 10, "rank": 0}, format="json")
    assert first.status_code == 202, first.content
    api.post(url(cluster.name), {"step": 12, "rank": 0, "checkpoint": True}, format="json")
    beat = Heartbeat.objects.get()
    assert (beat.rank, beat.step, beat.checkpoint) == (0, 12, True)
    assert beat.step_time_s is not None and beat.step_time_s >= 0


def test_a_replaced_token_stops_working(api, cluster):
    old = heartbeats.heartbeat_token_issue(watch=configure.watch_for(cluster))
    heartbeats.heartbeat_token_issue(watch=configure.watch_for(cluster))
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {old}")
    assert api.post(url(cluster.name), {"step": 1}, format="json").status_code == 401


def test_a_token_is_good_for_its_own_cluster_only(api, cluster):
    from clusters.services import cluster_create

    other = cluster_create(name="other", description="", expected_world_size=None, log_globs=[])
    token = heartbeats.heartbeat_token_issue(watch=configure.watch_for(other))
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.post(url(cluster.name), {"step": 1}, format="json").status_code == 403
    assert not Heartbeat.objects.exists()


def test_a_responders_api_token_works_a_viewers_does_not(api, cluster, bob, carol):
    from core.services import api_token_create

    _, secret = api_token_create(user=bob, name="job")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.post(url(cluster.name), {"step": 3}, format="json").status_code == 202
    _, secret = api_token_create(user=carol, name="job")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.post(url(cluster.name), {"step": 4}, format="json").status_code == 403


def test_no_credentials_no_heartbeat(api, cluster):
    assert api.post(url(cluster.name), {"step": 1}, format="json").status_code in (401, 403)


@pytest.mark.parametrize("body", [{}, {"step": -1}, {"step": "x"}, {"step": 1, "rank": -2}])
def test_a_bad_heartbeat_is_refused(api, cluster, body):
    token = heartbeats.heartbeat_token_issue(watch=configure.watch_for(cluster))
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.post(url(cluster.name), body, format="json").status_code == 400


def test_the_cluster_page_loads_the_watch_panel(as_user, carol, cluster):
    page = as_user(carol).get(cluster.get_absolute_url())
    assert reverse("watch:panel", args=[cluster.name]).encode() in page.content
    panel = as_user(carol).get(reverse("watch:panel", args=[cluster.name]))
    assert panel.status_code == 200 and b"not watched" in panel.content


def test_a_responder_turns_the_watch_on(as_user, bob, cluster):
    client = as_user(bob)
    answer = client.post(
        reverse("watch:settings", args=[cluster.name]),
        {"enabled": "on", "step_time_multiplier": "4", "floor_s": "90",
         "checkpoint_allowance_s": "600", "webhook_url": "https://hooks.example.com/x",
         "step_nodes": "gpu-0"},
    )  # fmt: skip
    assert answer.status_code == 302
    watch = Watch.objects.get(cluster=cluster)
    assert watch.enabled and watch.floor_s == 90 and watch.step_nodes == ["gpu-0"]
    panel = client.get(reverse("watch:panel", args=[cluster.name]))
    assert b"Learned step time" in panel.content and b"watch-step-figure" in panel.content


def test_a_bad_webhook_url_is_refused_on_the_form(as_user, alice, cluster):
    answer = as_user(alice).post(
        reverse("watch:settings", args=[cluster.name]),
        {"enabled": "on", "step_time_multiplier": "4", "floor_s": "90",
         "checkpoint_allowance_s": "600", "webhook_url": "file:///etc/passwd"},
    )  # fmt: skip
    assert answer.status_code == 400 and not Watch.objects.filter(enabled=True).exists()


def test_a_viewer_cannot_change_the_watch(as_user, carol, cluster):
    answer = as_user(carol).post(
        reverse("watch:settings", args=[cluster.name]),
        {"enabled": "on", "step_time_multiplier": "4", "floor_s": "90",
         "checkpoint_allowance_s": "600"},
    )  # fmt: skip
    assert answer.status_code == 403
    assert as_user(carol).post(reverse("watch:token", args=[cluster.name])).status_code == 403


def _evidence(drift: bool) -> SnapshotEvidence:
    def node(name: str, ranks: tuple[int, int], ifname: str, shell: str = "") -> NodeEvidence:
        ps = "  PID  PPID STAT ELAPSED ARGS\n" + "".join(
            f"  {10 + r}  1 Sl 100 python train.py\n" for r in ranks
        )
        environ = {
            10 + r: (f"RANK={r}\0LOCAL_RANK={r % 2}\0WORLD_SIZE=4\0NCCL_SOCKET_IFNAME={ifname}\0"
                     f"CUDA_VISIBLE_DEVICES={r % 2}\0").encode()
            for r in ranks
        }  # fmt: skip
        return NodeEvidence(node=name, ps=ps, environ=environ, shell_init=shell)

    bad = "/root/.bashrc:3:export NCCL_SOCKET_IFNAME=eth1\n" if drift else ""
    return SnapshotEvidence(
        nodes=[node("n0", (0, 1), "lo"), node("n1", (2, 3), "eth1" if drift else "lo", bad)],
        expected_world_size=4,
    )


def test_preflight_passes_when_ranks_agree(cluster, monkeypatch, capsys):
    monkeypatch.setattr(visits, "preflight_evidence_over_ssh", lambda c: _evidence(False))
    call_command("preflight", cluster.name, "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["ranks"] == [0, 1, 2, 3]
    assert report["per_rank_variables"] == ["CUDA_VISIBLE_DEVICES"]
    assert PreflightRun.objects.get().ok


def test_preflight_exits_non_zero_when_ranks_differ(cluster, monkeypatch, capsys):
    monkeypatch.setattr(visits, "preflight_evidence_over_ssh", lambda c: _evidence(True))
    with pytest.raises(SystemExit) as exited:
        call_command("preflight", cluster.name, "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in report["env_diffs"]] == ["NCCL_SOCKET_IFNAME"]
    assert report["shell_init"][0]["node"] == "n1"
    assert not PreflightRun.objects.get().ok


def test_preflight_of_an_unknown_cluster_is_status_2(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as failed:
        call_command("preflight", "nope")
    assert failed.value.returncode == 2


def test_preflight_names_a_rank_the_world_size_expects_and_exits_1(cluster, monkeypatch, capsys):
    evidence = _evidence(False)
    evidence.nodes[1].environ.pop(13)  # rank 3's process is gone from n1
    evidence.nodes[1].ps = evidence.nodes[1].ps.replace("  13  1 Sl 100 python train.py\n", "")
    monkeypatch.setattr(visits, "preflight_evidence_over_ssh", lambda c: evidence)
    with pytest.raises(SystemExit) as exited:
        call_command("preflight", cluster.name)
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert out.startswith("DIFFERENT: 3 of 4 ranks found (the cluster's setting): rank 3 missing")
    assert "missing ranks (no training process): 3 of world size 4" in out
    run = PreflightRun.objects.get()
    assert not run.ok and run.report["missing_ranks"] == [3]


def test_preflight_takes_the_world_size_from_the_ranks_when_the_cluster_has_none(
    cluster, monkeypatch, capsys
):
    evidence = _evidence(False)
    evidence.expected_world_size = None  # WORLD_SIZE=4 in every environment
    evidence.nodes[0].environ.pop(10)
    monkeypatch.setattr(visits, "preflight_evidence_over_ssh", lambda c: evidence)
    with pytest.raises(SystemExit):
        call_command("preflight", cluster.name, "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["missing_ranks"] == [0] and report["expected_world_size"] == 4
    assert "(WORLD_SIZE): rank 0 missing" in report["summary"]
