"""The post-mortem: drafted as a report of what happened, saved by responders as versions with
a status, rendered from Markdown that cannot inject HTML, read by all."""

import html
import re

import pytest
from rest_framework.test import APIClient

from collectors.services import snapshot_analyse, snapshot_record_decision
from collectors.starts import snapshot_import_bundle
from core.services import api_token_create
from incidents.markdown import render_markdown
from incidents.models import EventKind, PostMortem, PostMortemVersion
from incidents.postmortem_saving import postmortem_save
from incidents.services import incident_add_note, incident_change_status, incident_open
from tests.analysis.sample_evidence import load_snapshot
from tests.inert import active_parts

pytestmark = pytest.mark.django_db

READY = {
    "summary": "Rank 0 ran an extra broadcast.",
    "classification": "B",
    "root_cause": "if rank == 0: broadcast(...) in the eval hook",
    "action_items": "Remove the branch | bob | 2026-12-14\n\n"
    "- Add a collective-order test | carol | 2026-12-21",
}


@pytest.fixture
def worked_incident(bob, cluster, django_capture_on_commit_callbacks):
    incident = incident_open(opened_by=bob, title="run 12 hung", cluster=cluster, severity="SEV1")
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("mismatch"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    snapshot_record_decision(snapshot=snapshot, by=bob, classification="B", note="rank 0 branch")
    incident_add_note(incident=incident, by=bob, text="extra broadcast on rank 0", pinned=True)
    incident_change_status(incident=incident, to_status="resolved", by=bob, note="job restarted")
    return incident


def _form(page: str, name: str) -> str:
    match = re.search(rf'<textarea name="{name}"[^>]*>(.*?)</textarea>', page, re.S)
    assert match, f"no {name} field"
    return html.unescape(match.group(1))


def test_the_draft_reads_as_a_report_built_from_what_the_responders_concluded(
    as_user, bob, worked_incident
):
    page = as_user(bob).get(f"/incidents/{worked_incident.pk}/postmortem/").content.decode()
    assert "INVALID_TEMPLATE_VARIABLE" not in page
    assert '<option value="B" selected>' in page
    summary = _form(page, "summary")
    # What happened, not the verdict's instruction to the responder.
    assert "rank 0 called gloo:broadcast at train_step (train_lab.py:60)" in summary
    assert "Responders (bob) confirmed" in summary
    assert not summary.startswith(("Read ", "Look "))
    assert "rank 0 branch" in _form(page, "root_cause")  # the decision note reaches it
    assert "job restarted" in _form(page, "resolution")
    detection = _form(page, "detection")
    assert "Incident opened by bob" in detection and "Time to resolve" in detection
    items = _form(page, "action_items")
    assert "No collective under a rank-dependent branch" in items  # B's prevention
    assert re.search(r"5 x the measured step time of 0\.2\d* s", items)  # from the step time
    assert "| bob | " in items  # an owner and a due date on each
    assert "Crash handler" not in items  # nothing crashed


def test_a_responder_saves_versions_and_the_timeline_says_so(as_user, bob, worked_incident):
    client = as_user(bob)
    url = f"/incidents/{worked_incident.pk}/postmortem/"
    response = client.post(url, {**READY, "status": "draft"})
    assert response.status_code == 302
    postmortem = PostMortem.objects.get()
    assert postmortem.action_item_list == ["Remove the branch", "Add a collective-order test"]
    assert postmortem.action_item_rows[1]["owner"] == "carol"
    assert client.post(url, {**READY, "status": "published", "base_version": 1}).status_code == 302
    assert [(v.number, v.status, v.author) for v in PostMortemVersion.objects.all()] == [
        (1, "draft", bob),
        (2, "published", bob),
    ]
    summaries = list(
        worked_incident.events.filter(kind=EventKind.POSTMORTEM).values_list("summary", flat=True)
    )
    assert summaries == [
        "Post-mortem written (version 1, draft)",
        "Post-mortem published (version 2)",
    ]
    page = client.get(url).content.decode()
    assert "extra broadcast on rank 0" in page  # the pinned note
    assert "confirmed B" in page  # the decision, in "Decisions and overrides"
    assert 'id="document-chart"' in page  # the rank timeline chart


def test_saving_the_same_text_again_makes_no_version(bob, worked_incident):
    postmortem_save(incident=worked_incident, by=bob, status="draft", **READY)
    postmortem_save(incident=worked_incident, by=bob, status="draft", **READY)
    assert PostMortemVersion.objects.count() == 1


def test_publishing_needs_owners_and_due_dates_and_a_refusal_keeps_the_text(
    as_user, bob, worked_incident
):
    client = as_user(bob)
    url = f"/incidents/{worked_incident.pk}/postmortem/"
    fields = {**READY, "action_items": "Remove the branch | bob | next week", "status": "published"}
    page = client.post(url, fields, follow=True).content.decode()
    assert "Not published" in page and "is not YYYY-MM-DD" in page
    assert "Your text is saved as version 1 (draft)" in page
    postmortem = PostMortem.objects.get()
    assert postmortem.status == "draft" and "next week" in postmortem.action_items
    assert "<details open>" in page  # the editor opens on the kept text
    # Fixed, it publishes as the next version.
    fields["action_items"] = "Remove the branch | bob | 2026-12-24"
    client.post(url, {**fields, "base_version": 1})
    postmortem.refresh_from_db()
    assert (postmortem.status, postmortem.version) == ("published", 2)


def test_a_stale_editor_does_not_overwrite_a_newer_version(as_user, bob, worked_incident):
    postmortem_save(incident=worked_incident, by=bob, status="draft", **READY)
    postmortem_save(incident=worked_incident, by=bob, status="in_review", **READY)
    page = (
        as_user(bob)
        .post(
            f"/incidents/{worked_incident.pk}/postmortem/",
            {**READY, "summary": "my older text", "status": "draft", "base_version": 1},
        )
        .content.decode()
    )
    assert "bob saved version 2 while you edited version 1" in page
    assert "my older text" in page  # still in the form
    assert PostMortem.objects.get().summary == READY["summary"]


def test_versions_show_who_when_and_a_readable_diff(as_user, bob, worked_incident):
    postmortem_save(incident=worked_incident, by=bob, status="draft", **READY)
    changed = {**READY, "root_cause": "An eval hook broadcast on rank 0 only."}
    postmortem_save(incident=worked_incident, by=bob, status="in_review", **changed)
    page = (
        as_user(bob)
        .get(f"/incidents/{worked_incident.pk}/postmortem/versions/?a=1&b=2")
        .content.decode()
    )
    assert '<div class="del">if rank == 0: broadcast(...) in the eval hook</div>' in page
    assert '<div class="add">An eval hook broadcast on rank 0 only.</div>' in page
    assert "In review" in page


def test_a_viewer_reads_but_cannot_write_or_preview(as_user, bob, carol, worked_incident):
    client = as_user(carol)
    url = f"/incidents/{worked_incident.pk}/postmortem/"
    assert "No post-mortem has been written yet" in client.get(url).content.decode()
    assert client.post(url, {**READY, "status": "draft"}).status_code == 403
    assert client.post(f"{url}preview/", {"summary": "x"}).status_code == 403
    assert not PostMortem.objects.exists()
    postmortem_save(incident=worked_incident, by=bob, status="draft", **READY)
    page = client.get(url).content.decode()
    assert "Rank 0 ran an extra broadcast." in page
    assert 'id="postmortem-form"' not in page


def test_the_live_preview_renders_markdown_and_nothing_executable(as_user, bob, worked_incident):
    response = as_user(bob).post(
        f"/incidents/{worked_incident.pk}/postmortem/preview/",
        {
            "summary": "**Bold** <script>alert(1)</script> [x](javascript:alert(1))",
            "root_cause": '<img src=x onerror="alert(1)"> [ok](https://example.org/)',
        },
    )
    html = response.content.decode()
    assert "<strong>Bold</strong>" in html
    assert active_parts(html) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text
    assert '<a href="https://example.org/" rel="noopener noreferrer nofollow">ok</a>' in html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "[x](javascript:alert(1))",
        "[x](JAVASCRIPT:alert(1))",
        "[x](java\nscript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "<iframe src=https://example.org></iframe>",
        '<div style="background:url(javascript:alert(1))">x</div>',
        "![x](https://example.org/pixel.png)",
        "```\n</code></pre><script>alert(1)</script>\n```",
        "[x](vbscript:msgbox(1))",
        '[x](https://example.org/ "title" onmouseover=alert(1))',
    ],
)
def test_markdown_is_inert(text):
    html = str(render_markdown(text))
    assert active_parts(html, allowed_scripts=()) == [], html
    assert "<div" not in html  # only the listed tags survive


def test_the_api_reads_the_post_mortem(bob, worked_incident):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    url = f"/api/v1/incidents/{worked_incident.pk}/postmortem/"
    assert client.get(url).status_code == 404
    PostMortem.objects.create(incident=worked_incident, summary="s", action_items="a\nb")
    body = client.get(url).json()
    assert body["incident"] == worked_incident.reference
    assert body["action_items"] == ["a", "b"]
    assert [e["kind"] for e in body["pinned_events"]] == ["decision", "note"]


def test_the_draft_reads_as_the_incident_the_responders_worked(
    as_user, bob, cluster, django_capture_on_commit_callbacks
):
    """Issue 19: a system-opened incident is not "opened by the API"; the cause the
    responders answered is the cause, with actions for it (a SIGKILL: who sends one); the
    console's own reading trouble is a note on the evidence, not a contributing factor."""
    incident = incident_open(opened_by=None, title="demo", cluster=cluster, source="demo")
    evidence = load_snapshot("outside")
    evidence.nodes[0].logs["/var/log/train/agent.log"] = "agent heartbeat ok\n" * 3
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=evidence)
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    assert snapshot.diagnosis["parse_problems"]
    client = as_user(bob)
    guided = f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/guided/"
    client.post(guided, {"q": "why", "answer": "killed", "note": "launcher: signal 9"})

    page = client.get(f"/incidents/{incident.pk}/postmortem/").content.decode()
    detection = _form(page, "detection")
    assert "Incident opened by the demo" in detection and "the API" not in detection
    assert "Evidence quality (the console's own reading, not a cause): lab-node-0:" in detection
    assert "could not be read" not in _form(page, "contributing_factors")
    root = _form(page, "root_cause")
    assert "Cause (the responders' answer): rank 3 was killed with SIGKILL" in root
    assert "The evidence alone showed: alive but stuck outside any collective" in root
    assert "killed with SIGKILL" in _form(page, "summary")
    items = _form(page, "action_items")
    assert "Find who sent SIGKILL to rank 3 on lab-node-0: the scheduler (preemption" in items
    assert "cgroup or container limit" in items and "an operator" in items
    assert "DataLoader timeout" not in items  # the evidence's cause, overridden
    assert "init_process_group(timeout=...)" not in items  # no generic watchdog line
