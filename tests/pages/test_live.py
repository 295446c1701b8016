"""The incident page's live poll: one cheap read while nothing changed, then only what moved."""

import re

import pytest

from incidents.services import event_set_pinned, incident_add_note, incident_open

pytestmark = pytest.mark.django_db


def _poll_url(page: str) -> str:
    found = re.search(r'id="live-poll" hidden data-visible-only\s+hx-get="([^"]+)"', page)
    return found.group(1).replace("&amp;", "&")


def test_unchanged_is_a_204_after_one_read_and_a_note_brings_the_timeline(
    as_user, bob, cluster, django_assert_max_num_queries
):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    client = as_user(bob)
    url = _poll_url(client.get(incident.get_absolute_url()).content.decode())
    with django_assert_max_num_queries(3):  # session, user, the incident's version
        assert client.get(url, HTTP_HX_REQUEST="true").status_code == 204

    incident_add_note(incident=incident, by=bob, text="rank 3's node rebooted")
    answer = client.get(url, HTTP_HX_REQUEST="true")
    body = answer.content.decode()
    assert answer.status_code == 200
    assert '<div id="timeline-region" hx-swap-oob="true">' in body
    assert "rank 3&#x27;s node rebooted" in body
    assert 'id="live-news"' in body and "1 new on the timeline" in body
    # nothing else moved: the head and the evidence are not sent again
    assert 'id="head-region"' not in body and 'id="diagnosis-region"' not in body
    # the next poll asks from the new version, and is a 204 again
    following = _poll_url(body)
    assert following != url
    assert client.get(following, HTTP_HX_REQUEST="true").status_code == 204


def test_a_pin_or_a_status_move_is_noticed(as_user, bob, cluster):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    client = as_user(bob)
    url = _poll_url(client.get(incident.get_absolute_url()).content.decode())
    event_set_pinned(event=incident.events.get(), pinned=True)
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
    url = _poll_url(client.get(incident.get_absolute_url()).content.decode())
    client.post(f"/incidents/{incident.pk}/status/", {"to_status": "investigating"})
    body = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="head-region" hx-swap-oob="true"' in body and "Investigating" in body


def test_actions_answer_by_htmx_next_to_their_control(as_user, bob, cluster):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    client = as_user(bob)
    note = client.post(f"/incidents/{incident.pk}/notes/", {"text": ""}, HTTP_HX_REQUEST="true")
    assert note.status_code == 200 and "HX-Trigger" not in note
    assert 'class="flash error" role="alert"' in note.content.decode()
    moved = client.post(
        f"/incidents/{incident.pk}/status/", {"to_status": "investigating"}, HTTP_HX_REQUEST="true"
    )
    assert moved["HX-Trigger"] == "incident-changed"
    assert "INC-" in moved.content.decode() and "Investigating" in moved.content.decode()
    # without JavaScript: the old redirect, the message shown on the next page
    plain = client.post(f"/incidents/{incident.pk}/notes/", {"text": "seen"})
    assert plain.status_code == 302
