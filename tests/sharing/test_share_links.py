"""Share links: a read-only door to one published post-mortem, for people without an account.

Hostile evidence throughout: a secret-looking variable that differs between ranks, log lines
and stack frames carrying markup, notes carrying links with scripts."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

import analysis
from collectors.models import Snapshot, SnapshotStatus
from collectors.services import snapshot_record_decision
from hangdesk.masking import mask_json
from incidents.models import EventKind
from incidents.postmortem_saving import postmortem_save
from incidents.services import incident_add_note, incident_change_status, incident_open
from sharing.models import ShareLink, ShareView
from sharing.services import share_link_create, share_link_revoke
from tests.analysis.sample_evidence import load_snapshot
from tests.inert import active_parts, body_of

pytestmark = pytest.mark.django_db

SECRET_A = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
SECRET_B = "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
HOSTILE_LINE = '<script>alert("log")</script> [x](javascript:alert(1)) --hf-token ' + SECRET_A
HOSTILE_FRAME = "<img src=x onerror=alert(1)> (train.py:1)"
SECTIONS = {
    "summary": "Rank 0 ran an extra broadcast. <script>alert('md')</script>",
    "classification": "B",
    "root_cause": "[click](javascript:alert(1)) the eval hook; token was " + SECRET_B,
    "action_items": "Remove the branch | bob | 2026-12-14",
}


def _hostile_diagnosis() -> dict:
    d = analysis.diagnose(load_snapshot("mismatch")).to_json()
    d["env_diffs"] = [
        {
            "name": "HF_TOKEN",
            "values": [
                {"value": SECRET_A, "ranks": "0-2", "rank_count": 3, "nodes": ["lab-node-0"]},
                {"value": SECRET_B, "ranks": "3", "rank_count": 1, "nodes": ["lab-node-1"]},
            ],
            "expected_per_rank": False,
        }
    ]
    d["evidence"].insert(
        0, {"kind": "log_error", "node": "lab-node-0", "rank": 0, "text": HOSTILE_LINE}
    )
    d["stack_groups"][0]["stack"].insert(0, HOSTILE_FRAME)
    d["stack_groups"][0]["frame"] = "<b onmouseover=alert(1)>all_reduce</b>"
    return d


@pytest.fixture
def published(bob, cluster):
    """An incident with a hostile diagnosis, a decision, notes, and a published post-mortem."""
    incident = incident_open(opened_by=bob, title="run 12 <i>hung</i>", cluster=cluster)
    snapshot = Snapshot.objects.create(
        incident=incident,
        cluster=cluster,
        status=SnapshotStatus.DONE,
        finished_at=timezone.now(),
        # Stored as the analysis stores every diagnosis: masked (hangdesk/masking).
        diagnosis=mask_json(_hostile_diagnosis()),
    )
    snapshot_record_decision(
        snapshot=snapshot, by=bob, classification="B", note="<script>alert('note')</script>"
    )
    incident_add_note(
        incident=incident, by=bob, text="see [here](javascript:alert(2)) " + SECRET_A, pinned=True
    )
    incident_change_status(incident=incident, to_status="resolved", by=bob)
    postmortem_save(incident=incident, by=bob, status="published", **SECTIONS)
    return incident


def _create(client: Client, incident, **fields) -> str:
    page = client.post(
        f"/incidents/{incident.pk}/share/", {"label": "training team", "days": 7, **fields}
    ).content.decode()
    match = re.search(r'id="share-url">(http://testserver/s/[^<]+/)<', page)
    assert match, page
    return match.group(1).removeprefix("http://testserver")


def test_a_responder_creates_a_link_that_works_logged_out_and_reaches_nothing_else(
    as_user, bob, published
):
    url = _create(as_user(bob), published, include_evidence="on")
    token = url.split("/")[2]
    link = ShareLink.objects.get()
    assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(list(ShareLink.objects.values()))  # stored hashed only
    assert link.expires_at - timezone.now() > timedelta(days=6, hours=23)

    visitor = Client()
    response = visitor.get(url, HTTP_USER_AGENT="curl/8.5", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Rank 0 ran an extra broadcast." in html
    assert 'id="document-chart"' in html and 'id="document-figure"' in html
    assert "HF_TOKEN" in html  # the evidence summary's env diff
    assert response["X-Robots-Tag"].startswith("noindex")
    assert response["Referrer-Policy"] == "no-referrer"
    assert '<meta name="robots" content="noindex' in html
    assert not response.cookies and "Set-Cookie" not in str(response.headers)
    # Nothing of the console is reachable from it: no link anywhere, only its own static files.
    assert re.findall(r'href="(?!/static/)', html) == []
    assert set(re.findall(r'src="([^"]+)"', html)) <= {
        "/static/vendor/plotly/plotly.min.js",
        "/static/document-chart.js",
        "/static/chart-fit.js",
    }
    # And the token opens nothing else.
    for other in (
        f"/incidents/{published.pk}/",
        f"/incidents/{published.pk}/postmortem/",
        f"/incidents/{published.pk}/share/",
        f"/incidents/{published.pk}/postmortem/export.md",
        f"/api/v1/incidents/{published.pk}/postmortem/",
        f"/snapshots/{Snapshot.objects.get().pk}/",
        "/admin/",
    ):
        for accept in ("application/json", "text/html"):  # the browsable API too
            answer = visitor.get(other, HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT=accept)
            assert answer.status_code in (302, 401, 403), (other, accept)
            assert b"extra broadcast" not in answer.content

    view = ShareView.objects.get()
    assert (view.ip, view.user_agent) == ("203.0.113.9", "curl/8.5")
    listing = as_user(bob).get(f"/incidents/{published.pk}/share/").content.decode()
    assert "203.0.113.9" in listing and "curl/8.5" in listing and "training team" in listing
    assert token not in listing  # shown once, at creation


def test_a_logged_in_visitor_gets_no_cookie_either(as_user, bob, published):
    _, token = share_link_create(incident=published, by=bob)
    client = as_user(bob)
    assert client.get("/").status_code == 200  # a session in use
    response = client.get(f"/s/{token}/")
    assert response.status_code == 200
    assert not response.cookies


def test_revoked_expired_tampered_and_unknown_tokens_all_look_the_same(bob, published):
    _, live = share_link_create(incident=published, by=bob)
    revoked_link, revoked = share_link_create(incident=published, by=bob)
    share_link_revoke(link=revoked_link, by=bob)
    expired_link, expired = share_link_create(incident=published, by=bob)
    ShareLink.objects.filter(pk=expired_link.pk).update(expires_at=timezone.now())
    tampered = live[:-1] + ("A" if live[-1] != "A" else "B")
    visitor = Client()
    assert visitor.get(f"/s/{live}/").status_code == 200
    answers = [
        visitor.get(f"/s/{token}/")
        for token in (revoked, expired, tampered, "x" * 43, "nothing", "a" * 500)
    ]
    assert {a.status_code for a in answers} == {404}
    assert len({a.content for a in answers}) == 1
    assert len({tuple(sorted(a.headers.items())) for a in answers}) == 1
    assert b"This link is no longer available" in answers[0].content
    assert not any(a.cookies for a in answers)
    assert ShareView.objects.count() == 1  # only the live link's view


def test_a_viewer_cannot_create_or_revoke_links(as_user, bob, carol, published):
    link, token = share_link_create(incident=published, by=bob)
    client = as_user(carol)
    page = client.get(f"/incidents/{published.pk}/share/").content.decode()
    assert "Revoke" not in page and 'id="share-form"' not in page
    assert client.post(f"/incidents/{published.pk}/share/", {"days": 7}).status_code == 403
    assert client.post(f"/incidents/{published.pk}/share/{link.pk}/revoke/").status_code == 403
    assert ShareLink.objects.count() == 1 and ShareLink.objects.get().revoked_at is None
    assert Client().get(f"/s/{token}/").status_code == 200


def test_revoking_refuses_the_link_at_once_and_the_timeline_says_so(as_user, bob, published):
    client = as_user(bob)
    url = _create(client, published)
    assert Client().get(url).status_code == 200
    link = ShareLink.objects.get()
    client.post(f"/incidents/{published.pk}/share/{link.pk}/revoke/")
    assert Client().get(url).status_code == 404
    summaries = list(
        published.events.filter(kind=EventKind.POSTMORTEM).values_list("summary", flat=True)
    )
    assert summaries[-2:] == [
        "Share link created (post-mortem, 7 days): training team",
        "Share link revoked: training team",
    ]


def test_links_expire_after_one_to_ninety_days(as_user, bob, published):
    client = as_user(bob)
    for days in (0, 91):
        page = client.post(f"/incidents/{published.pk}/share/", {"days": days}).content.decode()
        assert 'id="share-url"' not in page
    assert not ShareLink.objects.exists()
    _create(client, published, days=90)
    assert ShareLink.objects.get().expires_at - timezone.now() > timedelta(days=89)


def test_only_a_published_post_mortem_can_be_shared(as_user, bob, published):
    postmortem = published.postmortem
    postmortem.versions.all().delete()
    page = as_user(bob).post(f"/incidents/{published.pk}/share/", {"days": 7}).content.decode()
    assert "Publish the post-mortem first" in page
    assert not ShareLink.objects.exists()


def test_the_shared_page_shows_the_published_version_not_a_later_draft(bob, published):
    _, token = share_link_create(incident=published, by=bob)
    postmortem_save(
        incident=published, by=bob, status="draft", **{**SECTIONS, "summary": "half-written"}
    )
    html = Client().get(f"/s/{token}/").content.decode()
    assert "Rank 0 ran an extra broadcast." in html and "half-written" not in html


@pytest.mark.django_db(transaction=True)
def test_link_views_are_rate_limited(bob, published, settings):
    settings.SHARE_VIEW_LIMIT = 3
    _, token = share_link_create(incident=published, by=bob)
    visitor = Client(REMOTE_ADDR="198.51.100.7")
    codes = [visitor.get(f"/s/{token}/").status_code for _ in range(3)]
    codes += [visitor.get(f"/s/guess-{n}/").status_code for n in range(2)]
    assert codes == [200, 200, 200, 429, 429]
    assert Client(REMOTE_ADDR="198.51.100.8").get(f"/s/{token}/").status_code == 200
    assert ShareView.objects.count() == 4


def _shared_pages(client: Client, published, token: str) -> dict[str, str]:
    base = f"/incidents/{published.pk}/postmortem/"
    return {
        "shared": Client().get(f"/s/{token}/").content.decode(),
        "post-mortem page": client.get(base).content.decode(),
        "print page": client.get(f"{base}print/?evidence=1").content.decode(),
        "markdown": client.get(f"{base}export.md?evidence=1").content.decode(),
        "markdown, no evidence": client.get(f"{base}export.md").content.decode(),
    }


def test_secrets_are_masked_everywhere_and_their_difference_still_shows(as_user, bob, published):
    _, token = share_link_create(incident=published, by=bob, include_evidence=True)
    pages = _shared_pages(as_user(bob), published, token)
    for name, text in pages.items():
        assert SECRET_A not in text and SECRET_B not in text, name
        assert "[REDACTED:" in text, name
    env = pages["shared"].split('id="pm-env-diff"', 1)[1].split("</table>", 1)[0]
    masked = set(re.findall(r"\[REDACTED:[0-9a-f]+\]", env))
    assert len(masked) == 2  # still two different values: ranks 0-2 and rank 3 differ
    env_md = pages["markdown"].split("### Environment differences", 1)[1].split("###", 1)[0]
    assert "HF\\_TOKEN" in env_md  # Markdown-escaped
    assert len(set(re.findall(r"REDACTED:([0-9a-f]+)", env_md))) == 2


def test_markup_in_logs_stack_frames_notes_and_markdown_is_inert(as_user, bob, published):
    _, token = share_link_create(incident=published, by=bob, include_evidence=True)
    pages = _shared_pages(as_user(bob), published, token)
    for name in ("shared", "post-mortem page", "print page"):
        html = body_of(pages[name])
        assert active_parts(html) == [], name
        assert "&lt;script&gt;alert(&quot;log&quot;)&lt;/script&gt;" in html, name  # as text
        if name != "post-mortem page":  # with the evidence summary
            assert "&lt;img src=x onerror=alert(1)&gt;" in html, name  # the frame, as text
    markdown = pages["markdown"]
    # Plain text (notes, decisions) is escaped; quoted evidence sits in a code fence.
    assert "\\<script\\>alert\\('note'\\)\\</script\\>" in markdown
    assert "see \\[here\\]\\(javascript:alert\\(2\\)\\)" in markdown
    fence = markdown.split("Evidence:", 1)[1]
    assert fence.lstrip().startswith("```text") and '<script>alert("log")' in fence
