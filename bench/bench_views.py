"""The views beside the incident page that read a snapshot's diagnosis, timed on the snapshot
bench_incident_page.py built (its `--views`): each one's server time, CPU, queries and bytes."""

from __future__ import annotations

from collections.abc import Callable

SHARED_INCIDENT = "bench: shared post-mortem"
SECTIONS = {
    "summary": "The job hung at step 14200.",
    "impact": "Four hours of a 32,000-rank job.",
    "detection": "The watchdog opened the incident.",
    "resolution": "The node was drained and the job restarted.",
    "root_cause": "One rank stopped outside the collective.",
    "contributing_factors": "None known.",
    "action_items": "Drain the node | bench | 2026-12-31",
}


def time_views(timed: Callable, client, snapshot, user) -> None:
    from django.test import Client
    from django.urls import reverse

    from collectors.models import Artifact

    incident = snapshot.incident
    pk, spk = incident.pk, snapshot.pk
    head = snapshot.rank_overview or {}
    suspect = next((r["rank"] for r in head.get("rows", []) if r.get("suspect")), 0)
    timed("live poll, unchanged (204)", _live(client, incident, same=True), expect=204)
    timed("live poll, timeline + verdict", _live(client, incident, same=False))
    rank = reverse("pages:guided_rank", args=[pk, spk, suspect])
    timed(f"rank page, the suspect (rank {suspect})", rank)
    world = snapshot.expected_world_size or 1
    far = 20_000 if world > 20_000 else world - 1  # past the overview's first 200 ranks
    timed(f"rank page, rank {far} (in no overview row above 200 ranks)", reverse(
        "pages:guided_rank", args=[pk, spk, far]))  # fmt: skip
    timed("environment page", reverse("pages:guided_env", args=[pk, spk]))
    log = (
        Artifact.objects.filter(collection__snapshot=snapshot, name__startswith="logs/")
        .order_by("collection__node_name", "name").values_list("pk", flat=True).first()
    )  # fmt: skip
    timed("evidence viewer, one log", reverse("collectors:artifact_view", args=[spk, log]))
    quote = _linkable_quote(snapshot)
    if quote is not None:
        timed(
            f"evidence viewer, quoted line {quote}", reverse("collectors:quote", args=[spk, quote])
        )
    timed("post-mortem page (first draft)", reverse("pages:postmortem", args=[pk]))
    timed("API snapshot", f"/api/v1/snapshots/{spk}/")
    timed("API diagnosis", f"/api/v1/snapshots/{spk}/diagnosis/")
    ranks_api = f"/api/v1/snapshots/{spk}/ranks/"
    if client.get(ranks_api).status_code == 200:
        timed("API ranks, first page", ranks_api)
        timed("API ranks, offset 20000", ranks_api + "?offset=20000")
    shared = _published_copy(snapshot, user)
    # On the copy: each answer is a timeline event, which the incident page would show.
    answered = reverse("pages:guided_answer", args=[shared.pk, shared.snapshots.get().pk])
    timed("guided answer (POST)", answered, 302, post={"q": "who", "action": "confirm"})
    timed("post-mortem page (published)", reverse("pages:postmortem", args=[shared.pk]))
    timed("print page", reverse("sharing:print", args=[shared.pk]))
    timed("Markdown export", reverse("sharing:export", args=[shared.pk]))
    token = _share_token(shared, user)
    timed("shared page (with evidence)", f"/s/{token}/", cl=Client())
    listed = type(incident).objects.count()
    timed(f"incident list ({listed} incidents)", reverse("pages:incident_list"))
    timed("cluster page (its nodes)", reverse("clusters:detail", args=[incident.cluster.name]))


def _linkable_quote(snapshot) -> int | None:
    from collectors.evidence_viewer import is_linkable
    from collectors.models import Snapshot

    diagnosis = Snapshot.objects.for_pages().get(pk=snapshot.pk).read_diagnosis()
    return next((i for i, q in enumerate(diagnosis.evidence) if is_linkable(q)), None)


def _live(client, incident, *, same: bool) -> str:
    from django.urls import reverse

    incident.refresh_from_db()
    version = incident.version if same else 0
    return reverse("pages:incident_live", args=[incident.pk]) + f"?version={version}&verdict="


def _published_copy(snapshot, user):
    """A resolved incident with a published post-mortem whose snapshot holds the same
    diagnosis (made once; reused)."""
    from collectors.models import Snapshot, SnapshotStatus
    from incidents.models import Incident, PostMortem
    from incidents.postmortem_saving import postmortem_save
    from incidents.services import incident_change_status, incident_open

    found = Incident.objects.filter(title=SHARED_INCIDENT, cluster=snapshot.cluster).first()
    if found is not None and PostMortem.objects.filter(incident=found, status="published").exists():
        return found
    if found is not None:  # an earlier run's, not published
        found.delete()
    incident = incident_open(opened_by=user, title=SHARED_INCIDENT, cluster=snapshot.cluster)
    whole = Snapshot.objects.get(pk=snapshot.pk)
    Snapshot.objects.create(
        incident=incident, cluster=snapshot.cluster, status=SnapshotStatus.DONE,
        finished_at=whole.finished_at, expected_world_size=whole.expected_world_size,
        diagnosis=whole.whole_diagnosis(), rank_overview=whole.rank_overview,
    )  # fmt: skip
    incident_change_status(incident=incident, to_status="resolved", by=user)
    postmortem_save(incident=incident, by=user, status="published", **SECTIONS)
    return incident


def _share_token(incident, user) -> str:
    from sharing.services import share_link_create

    _, token = share_link_create(incident=incident, by=user, include_evidence=True, days=7)
    return token
