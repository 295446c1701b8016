"""Share links showed what nobody published (a medium finding): only the written sections came
from the published version; the verdict, evidence lines and rank chart came from the latest
snapshot (even one taken after publishing), pinned and decision notes were read at every view,
and a link made without the evidence summary still showed the verdict, evidence lines, every
rank's node and frame in the chart data, and console user names. Now a link shows the
published version frozen as it was, and only what its options include."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

import analysis
from collectors.models import Snapshot, SnapshotStatus
from collectors.services import snapshot_record_decision
from incidents.models import TimelineEvent
from incidents.services import incident_add_note, incident_open
from sharing.models import PublishedDocument, ShareLink, ShareView
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db

RESPONDER = "dana-oncall"  # a user name that appears in no written section
SECTIONS = {
    "summary": "Rank 3 was killed; the rest waited.",
    "classification": "A",
    "root_cause": "The OOM killer took rank 3.",
    "action_items": "Lower the batch size | platform | 2026-12-14",
}


@pytest.fixture
def dana(django_user_model):
    user = django_user_model.objects.create_user(RESPONDER, password="dana-password")
    user.groups.add(Group.objects.get_or_create(name="responder")[0])
    return user


def _snapshot(incident, scenario: str, node: str) -> Snapshot:
    diagnosis = analysis.diagnose(load_snapshot(scenario)).to_json()
    for row in diagnosis["per_rank"]:
        row["node"] = node
    for line in diagnosis["evidence"]:
        line["node"] = node
    return Snapshot.objects.create(
        incident=incident, cluster=incident.cluster, status=SnapshotStatus.DONE,
        finished_at=timezone.now(), diagnosis=diagnosis,
    )  # fmt: skip


@pytest.fixture
def published(dana, cluster, as_user):
    """Published through the page, as a responder does: the page freezes the document."""
    incident = incident_open(opened_by=dana, title="run 12 hung", cluster=cluster)
    before = _snapshot(incident, "outside", node="node-at-publish")
    snapshot_record_decision(snapshot=before, by=dana, classification="A", note="agreed at 3am")
    incident_add_note(incident=incident, by=dana, text="pinned before publishing", pinned=True)
    answer = as_user(dana).post(
        f"/incidents/{incident.pk}/postmortem/", {**SECTIONS, "status": "published"}
    )
    assert answer.status_code == 302, answer.content[:2000]
    assert PublishedDocument.objects.count() == 1
    return incident


def _link(client: Client, incident, **fields) -> str:
    page = client.post(f"/incidents/{incident.pk}/share/", {"days": 7, **fields}).content.decode()
    return re.search(r'id="share-url">http://testserver(/s/[^<]+/)<', page).group(1)


def _after_publishing(incident, dana):
    """What happens to the incident after the post-mortem went out."""
    later = _snapshot(incident, "mismatch", node="node-after-publish")
    snapshot_record_decision(snapshot=later, by=dana, classification="B", note="changed my mind")
    incident_add_note(incident=incident, by=dana, text="pinned after publishing", pinned=True)
    TimelineEvent.objects.filter(summary__contains="pinned before").update(pinned=False)


def test_a_link_shows_the_version_as_published_not_the_incident_today(published, dana, as_user):
    url = _link(as_user(dana), published, include_evidence="on")
    _after_publishing(published, dana)
    html = Client().get(url).content.decode()
    assert "node-at-publish" in html and "pinned before publishing" in html
    assert "agreed at 3am" in html
    for later in ("node-after-publish", "pinned after publishing", "changed my mind"):
        assert later not in html, later
    assert 'id="postmortem-frozen"' in html


def test_a_link_without_the_evidence_summary_shows_no_verdict_chart_or_names(
    published, dana, as_user
):
    html = Client().get(_link(as_user(dana), published)).content.decode()
    assert "The OOM killer took rank 3." in html  # what was written and published
    assert "node-at-publish" not in html  # no evidence line, no chart data with nodes
    assert 'id="document-figure"' not in html and "Verdict and its evidence" not in html
    assert RESPONDER not in html


def test_no_console_user_name_on_a_shared_page_with_evidence(published, dana, as_user):
    html = Client().get(_link(as_user(dana), published, include_evidence="on")).content.decode()
    assert "node-at-publish" in html and RESPONDER not in html
    assert "a responder" in html  # who decided and pinned, without a name


def test_a_version_published_before_freezing_existed_is_frozen_when_first_shared(
    published, dana, as_user
):
    PublishedDocument.objects.all().delete()  # as it stood before this change
    url = _link(as_user(dana), published, include_evidence="on")
    assert PublishedDocument.objects.count() == 1
    _after_publishing(published, dana)
    assert "node-after-publish" not in Client().get(url).content.decode()


def test_viewers_see_how_often_a_link_was_opened_not_by_whom(published, dana, carol, as_user):
    url = _link(as_user(dana), published)
    Client().get(url, HTTP_USER_AGENT="SecretBrowser/1.0", REMOTE_ADDR="198.51.100.23")
    page = as_user(carol).get(f"/incidents/{published.pk}/share/").content.decode()
    assert "198.51.100.23" not in page and "SecretBrowser" not in page
    responder_page = as_user(dana).get(f"/incidents/{published.pk}/share/").content.decode()
    assert "198.51.100.23" in responder_page and "SecretBrowser" in responder_page


def test_views_are_pruned_after_the_keep_period(published, dana, as_user, settings):
    settings.SHARE_VIEW_KEEP_DAYS = 30
    url = _link(as_user(dana), published)
    link = ShareLink.objects.get()
    ShareView.objects.create(link=link, at=timezone.now() - timedelta(days=31), ip="192.0.2.1")
    ShareView.objects.create(link=link, at=timezone.now() - timedelta(days=29), ip="192.0.2.2")
    Client().get(url)
    assert sorted(ShareView.objects.values_list("ip", flat=True)) == ["127.0.0.1", "192.0.2.2"]
