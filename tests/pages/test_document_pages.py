"""The post-mortem pages' and the sharing pages' one read each (pages/selectors.py:
postmortem_page, postmortem_versions_page; sharing/selectors.py: shared_page,
share_links_page, postmortem_document): what each returns for a small worked incident, in a
number of queries that grows with neither notes, decisions, versions, links nor views."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from collectors.services import snapshot_analyse, snapshot_record_decision
from collectors.starts import snapshot_import_bundle
from incidents.postmortem_saving import postmortem_save
from incidents.services import incident_add_note, incident_open
from pages import selectors as page_selectors
from sharing import selectors as share_selectors
from sharing.documents import Document, freeze_published
from sharing.models import ShareLink
from sharing.services import share_link_create, share_link_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db

READY = {
    "summary": "Rank 0 ran an extra broadcast.",
    "classification": "B",
    "root_cause": "if rank == 0: broadcast(...) in the eval hook",
    "action_items": "Remove the branch | bob | 2026-12-14",
}


@pytest.fixture
def worked(bob, cluster, django_capture_on_commit_callbacks):
    """An incident worked `notes` times over: an analysed snapshot, a decision per note, the
    notes pinned, a post-mortem saved `versions` times and published."""

    def make(*, notes: int = 1, versions: int = 1):
        incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
        with django_capture_on_commit_callbacks():
            snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("mismatch"))
        snapshot_analyse(snapshot_id=snapshot.pk)
        snapshot.refresh_from_db()
        for index in range(notes):
            snapshot_record_decision(
                snapshot=snapshot, by=bob, classification="B", note=f"n{index}"
            )
            incident_add_note(incident=incident, by=bob, text=f"pinned {index}", pinned=True)
        for index in range(versions - 1):
            postmortem_save(incident=incident, by=bob, status="draft", **READY, impact=f"v{index}")
        postmortem = postmortem_save(incident=incident, by=bob, status="published", **READY)
        freeze_published(incident, postmortem)
        return incident

    return make


def _notes(doc: Document) -> list[str]:
    """The pinned notes of a document (decisions are pinned too)."""
    return [p["summary"] for p in doc.pinned if p["summary"].startswith("pinned")]


def _queries(read) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def test_the_postmortem_page_before_the_first_save_has_only_the_editor(bob, cluster):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    page = page_selectors.postmortem_page(incident)
    assert (page.postmortem, page.doc, page.versions, page.form) == (None, None, [], None)
    page = page_selectors.postmortem_page(incident, editor=True)
    draft = page.form.instance
    assert draft.pk is None and draft.incident == incident  # a first draft, unsaved
    assert any(getattr(draft, name) for name, _ in page.sections)
    assert not page.form.is_bound and page.sections[0][0] == "summary"
    assert page_selectors.postmortem_versions_page(incident, old=None, new=None) is None


def test_the_postmortem_page_shows_the_document_as_it_stands(worked):
    incident = worked(notes=2, versions=2)
    page = page_selectors.postmortem_page(incident, editor=True, editing=True)
    assert page.form.instance == page.postmortem and page.editing
    assert isinstance(page.doc, Document) and page.doc.version is None  # as it stands
    assert [v.number for v in page.versions] == [2, 1]
    assert page.doc.number == 2 and page.doc.status == "published" and page.doc.author == "bob"
    assert page.doc.class_name.startswith("B")
    assert _notes(page.doc) == ["pinned 0", "pinned 1"]
    assert len(page.doc.decisions) == 2 and page.doc.verdict["classification"] == "B"
    assert set(page.context()) == {
        "incident", "postmortem", "versions", "doc", "form", "sections", "editing",
    }  # fmt: skip


def test_the_postmortem_page_reads_in_queries_that_do_not_grow(worked):
    small, large = worked(notes=1, versions=1), worked(notes=8, versions=6)

    def read(incident):
        return page_selectors.postmortem_page(incident, editor=True)

    assert _queries(lambda: read(large)) == _queries(lambda: read(small))


def test_the_rendered_postmortem_pages_do_not_query_per_row(as_user, bob, worked):
    client = as_user(bob)
    small, large = worked(notes=1, versions=2), worked(notes=8, versions=6)
    client.get(f"/incidents/{small.pk}/postmortem/")  # the session's first reads
    for path in ("postmortem/", "postmortem/versions/?a=1&b=2", "share/", "postmortem/print/"):
        urls = [f"/incidents/{incident.pk}/{path}" for incident in (small, large)]
        counts = [_queries(lambda url=url: client.get(url)) for url in urls]
        assert counts[0] == counts[1], path


def test_the_versions_page_diffs_two_versions_or_says_why_not(worked):
    incident = worked(versions=3)
    page = page_selectors.postmortem_versions_page(incident, old=None, new=None)
    assert (page.diff["old"].number, page.diff["new"].number, page.refused) == (2, 3, "")
    assert [v.number for v in page.versions] == [3, 2, 1]
    page = page_selectors.postmortem_versions_page(incident, old=1, new=9)
    assert page.diff is None and "has versions 1 to 3" in page.refused


def test_the_shared_page_is_the_frozen_published_document_without_names(worked, bob):
    incident = worked(notes=2)
    _, token = share_link_create(incident=incident, by=bob)
    link = share_link_open(token=token, ip="127.0.0.1", user_agent="test")
    page = share_selectors.shared_page(link)
    assert page.expires_at == link.expires_at
    doc = page.doc
    assert doc.frozen_at is not None and doc.version.number == 1
    assert doc.author == "" and {d["actor"] for d in doc.decisions} == {"a responder"}
    assert doc.verdict is None and doc.evidence_withheld  # a link without the evidence
    incident_add_note(incident=incident, by=bob, text="pinned after publishing", pinned=True)
    again = share_selectors.shared_page(link).doc
    assert _notes(again) == ["pinned 0", "pinned 1"]  # frozen


def test_the_shared_page_with_evidence_and_without_a_published_version(worked, bob, cluster):
    incident = worked()
    _, token = share_link_create(incident=incident, by=bob, include_evidence=True)
    link = share_link_open(token=token, ip=None, user_agent="")
    doc = share_selectors.shared_page(link).doc
    assert doc.verdict["classification"] == "B" and doc.evidence is not None and doc.figure
    other = incident_open(opened_by=bob, title="other", cluster=cluster, severity="SEV3")
    unpublished = ShareLink(incident=other, include_evidence=True)
    assert share_selectors.shared_page(unpublished) is None


def test_the_shared_page_reads_in_queries_that_do_not_grow(worked, bob):
    links = []
    for incident in (worked(notes=1), worked(notes=8, versions=5)):
        _, token = share_link_create(incident=incident, by=bob, include_evidence=True)
        links.append(share_link_open(token=token, ip=None, user_agent=""))
    assert _queries(lambda: share_selectors.shared_page(links[1])) == _queries(
        lambda: share_selectors.shared_page(links[0])
    )


def test_the_rendered_shared_page_does_not_query_per_row(worked, bob):
    tokens = []
    for incident in (worked(notes=1), worked(notes=8, versions=5)):
        tokens.append(share_link_create(incident=incident, by=bob, include_evidence=True)[1])
    reader = Client()
    counts = [_queries(lambda t=t: reader.get(f"/s/{t}/")) for t in tokens]
    assert counts[0] == counts[1]
    assert "pinned 7" in reader.get(f"/s/{tokens[1]}/").content.decode()


def test_the_links_page_counts_every_links_views_in_fixed_queries(worked, bob):
    incident = worked()
    _, token = share_link_create(incident=incident, by=bob, label="first")
    share_link_open(token=token, ip="127.0.0.1", user_agent="a")
    page = share_selectors.share_links_page(incident, can_share=True)
    assert page.published.number == 1 and [link.view_count for link in page.links] == [1]
    before = _queries(lambda: _views_of(share_selectors.share_links_page(incident, can_share=True)))
    for index in range(4):
        _, token = share_link_create(incident=incident, by=bob, label=f"l{index}")
        for _ in range(3):
            share_link_open(token=token, ip="127.0.0.1", user_agent="b")
    after = _queries(lambda: _views_of(share_selectors.share_links_page(incident, can_share=True)))
    assert after == before
    page = share_selectors.share_links_page(incident, can_share=False)
    assert sorted(link.view_count for link in page.links) == [1, 3, 3, 3, 3]


def _views_of(page) -> list:
    return [list(link.views.all()) for link in page.links]  # as the template reads them


def test_the_print_document_is_the_postmortem_as_it_stands(worked, bob, cluster):
    incident = worked(notes=1)
    incident_add_note(incident=incident, by=bob, text="pinned later", pinned=True)
    doc = share_selectors.postmortem_document(incident, evidence=True)
    assert doc.frozen_at is None and doc.evidence is not None and doc.author == "bob"
    assert doc.pinned[-1]["summary"] == "pinned later"  # live, not frozen
    other = incident_open(opened_by=bob, title="other", cluster=cluster, severity="SEV3")
    assert share_selectors.postmortem_document(other) is None
