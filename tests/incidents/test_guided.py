"""The guided workflow on the incident page: the class's branch, each question pre-answered
with its evidence, confirmed or overridden (a timeline event with its author), and the buttons
that end the branch."""

from __future__ import annotations

import re
import zlib

import pytest

from collectors.models import Artifact, Snapshot
from collectors.services import snapshot_analyse, snapshot_record_decision
from collectors.starts import snapshot_import_bundle
from incidents.models import EventKind, Incident
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot
from tests.inert import active_parts, body_of

pytestmark = pytest.mark.django_db

SECRET = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def _incident(bob, cluster, capture, sample: str) -> tuple[Incident, Snapshot]:
    incident = incident_open(opened_by=bob, title=f"{sample} hang", cluster=cluster)
    with capture():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot(sample))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    return incident, snapshot


@pytest.fixture
def stalled(bob, cluster, django_capture_on_commit_callbacks):
    """Class A: rank 3 alive but stuck in its data loader, ranks 0-2 in all_reduce."""
    return _incident(bob, cluster, django_capture_on_commit_callbacks, "outside")


def _guided(page: str) -> str:
    match = re.search(r'<section class="card guided" id="guided">(.*?)</section>', page, re.S)
    assert match, "no guided panel"
    return match.group(1)


def test_the_branch_asks_its_questions_pre_answered_with_the_evidence_beside(as_user, bob, stalled):
    incident, _ = stalled
    panel = _guided(as_user(bob).get(incident.get_absolute_url()).content.decode())
    assert "Which rank left or stalled first?" in panel
    assert "Why did it leave?" in panel
    assert "Are the other ranks waiting for it in the same collective?" in panel
    assert "Slow or dead?" in panel
    why = panel.split('id="guided-why"', 1)[1].split("</li>\n  \n", 1)[0]
    assert "Alive but stuck outside any collective" in why  # the pre-answer
    assert "SlowLoader.__next__ (train_lab.py:33)" in why  # its evidence, beside it
    for button in ("guided-second-snapshot", "guided-log-tail", "guided-env", "guided-resolve"):
        assert f'id="{button}"' in panel
    assert "Rank 3's log tail and lab-node-0's dmesg" in panel


def test_confirm_and_override_are_timeline_events_with_their_author(as_user, bob, stalled):
    incident, snapshot = stalled
    client = as_user(bob)
    url = f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/guided/"
    client.post(url, {"q": "who", "action": "confirm"})
    client.post(
        url, {"q": "why", "action": "override", "answer": "oom", "note": "dmesg shows the cgroup"}
    )
    answers = list(incident.events.filter(kind=EventKind.ANSWER).order_by("pk"))
    assert [(a.author, a.details["answer"], a.details["agreed"]) for a in answers] == [
        (bob, "suspect", True),
        (bob, "oom", False),
    ]
    assert answers[1].summary == (
        "Why did it leave? overrode Alive but stuck outside any collective (CPU side: data, "
        "I/O or a lock) with Killed by the kernel OOM killer — dmesg shows the cgroup"
    )
    assert answers[1].pinned and not answers[0].pinned  # an override goes to the post-mortem
    panel = _guided(client.get(incident.get_absolute_url()).content.decode())
    assert "Overridden: <strong>Killed by the kernel OOM killer</strong>" in panel
    assert "by bob" in panel and "2 of 4 answered" in panel
    # The override reaches the post-mortem's draft, in the responders' words.
    draft = client.get(f"/incidents/{incident.pk}/postmortem/").content.decode()
    assert "dmesg shows the cgroup" in draft


def test_the_branch_follows_the_responders_call(as_user, bob, stalled):
    incident, snapshot = stalled
    snapshot_record_decision(snapshot=snapshot, by=bob, classification="C")
    panel = _guided(as_user(bob).get(incident.get_absolute_url()).content.decode())
    assert "What differs between the ranks?" in panel
    assert "Why did it leave?" not in panel


def test_answers_outside_the_branch_are_refused(as_user, bob, stalled):
    incident, snapshot = stalled
    client = as_user(bob)
    url = f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/guided/"
    client.post(url, {"q": "why", "action": "override", "answer": "<script>"})
    client.post(url, {"q": "no-such-question", "action": "confirm"})
    assert not incident.events.filter(kind=EventKind.ANSWER).exists()


def test_a_viewer_sees_the_branch_but_cannot_answer_or_open_raw_evidence(as_user, carol, stalled):
    incident, snapshot = stalled
    client = as_user(carol)
    panel = _guided(client.get(incident.get_absolute_url()).content.decode())
    assert "Which rank left or stalled first?" in panel and "<form" not in panel
    base = f"/incidents/{incident.pk}/snapshots/{snapshot.pk}"
    assert client.post(f"{base}/guided/", {"q": "who", "action": "confirm"}).status_code == 403
    assert client.get(f"{base}/ranks/3/").status_code == 403
    assert client.get(f"{base}/environment/").status_code == 403
    assert client.post(f"/incidents/{incident.pk}/resolve-and-write/").status_code == 403
    assert not incident.events.filter(kind=EventKind.ANSWER).exists()


def test_the_log_tail_and_dmesg_button_shows_them_from_the_snapshot(as_user, bob, stalled):
    incident, snapshot = stalled
    log = Artifact.objects.get(collection__snapshot=snapshot, name__endswith="/rank3.log")
    last = log.content.decode().splitlines()[-1]
    page = as_user(bob).get(f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/ranks/3/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "rank3.log" in html and last.split()[-1] in html
    assert 'id="node-dmesg"' in html


def test_raw_lines_on_the_guided_pages_are_masked_and_inert(as_user, bob, stalled):
    incident, snapshot = stalled
    log = Artifact.objects.get(collection__snapshot=snapshot, name__endswith="/rank3.log")
    hostile = f"<script>alert(1)</script> --hf-token {SECRET} [x](javascript:alert(1))\n"
    log.compressed = zlib.compress(log.content + hostile.encode())
    log.save()
    html = (
        as_user(bob)
        .get(f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/ranks/3/")
        .content.decode()
    )
    assert SECRET not in html and "[REDACTED:" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert active_parts(body_of(html)) == []


def test_the_environment_comparison_masks_secrets_but_shows_they_differ(as_user, bob, stalled):
    incident, snapshot = stalled
    diagnosis = snapshot.whole_diagnosis()
    suspect = next(r for r in diagnosis["per_rank"] if r["rank"] == 3)
    healthy = next(r for r in diagnosis["per_rank"] if r["rank"] == 0)
    for row, value in ((suspect, SECRET), (healthy, SECRET[::-1])):
        environ = Artifact.objects.get(collection__snapshot=snapshot, name=f"environ/{row['pid']}")
        raw = environ.content + f"HF_TOKEN={value}\0NCCL_DEBUG={row['rank']}\0".encode()
        environ.compressed = zlib.compress(raw)
        environ.save()
    html = (
        as_user(bob)
        .get(f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/environment/")
        .content.decode()
    )
    assert SECRET not in html and SECRET[::-1] not in html
    row = re.search(r'<tr class="differs"><td><code>HF_TOKEN</code></td>(.*?)</tr>', html, re.S)
    assert row, "HF_TOKEN is not shown as differing"
    masked = re.findall(r"\[REDACTED:[0-9a-f]+\]", row.group(1))
    assert len(set(masked)) == 2
    assert '<tr class="per-rank"><td><code>RANK</code>' in html  # by design, not a suspect


def test_the_last_button_resolves_and_opens_the_post_mortem(as_user, bob, stalled):
    incident, _ = stalled
    response = as_user(bob).post(f"/incidents/{incident.pk}/resolve-and-write/")
    assert response.status_code == 302
    assert response["Location"] == f"/incidents/{incident.pk}/postmortem/"
    incident.refresh_from_db()
    assert incident.status == "resolved"
    # Pressed again on a resolved incident it only opens the post-mortem.
    assert as_user(bob).post(f"/incidents/{incident.pk}/resolve-and-write/").status_code == 302
    assert incident.events.filter(kind=EventKind.STATUS).count() == 1


@pytest.mark.parametrize(
    ("sample", "first_question"),
    [
        ("mismatch", "Do the ranks run different collectives"),
        ("init", "Did any step complete?"),
        ("crash", "Which rank left or stalled first?"),
    ],
)
def test_each_class_has_its_branch_on_the_page(
    as_user, bob, cluster, django_capture_on_commit_callbacks, sample, first_question
):
    incident, _ = _incident(bob, cluster, django_capture_on_commit_callbacks, sample)
    panel = _guided(as_user(bob).get(incident.get_absolute_url()).content.decode())
    assert first_question in panel


def test_a_closed_incident_takes_no_answer(as_user, bob, stalled):
    incident, snapshot = stalled
    Incident.objects.filter(pk=incident.pk).update(status="closed")
    client = as_user(bob)
    client.post(
        f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/guided/",
        {"q": "who", "action": "confirm"},
    )
    assert not incident.events.filter(kind=EventKind.ANSWER).exists()
    panel = _guided(client.get(incident.get_absolute_url()).content.decode())
    assert "<form" not in panel and "Which rank left or stalled first?" in panel


def _second_snapshot(incident, capture, sample: str) -> Snapshot:
    with capture():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot(sample))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    return snapshot


def _question(panel: str, qid: str) -> str:
    return panel.split(f'id="guided-{qid}"', 1)[1].split("</li>", 1)[0]


def test_the_submitted_choice_is_what_is_recorded_whichever_button_sent_it(as_user, bob, stalled):
    incident, snapshot = stalled
    client = as_user(bob)
    url = f"/incidents/{incident.pk}/snapshots/{snapshot.pk}/guided/"
    # The old form's blue "Confirm" sent action=confirm with the chosen answer beside it.
    client.post(url, {"q": "why", "action": "confirm", "answer": "killed", "note": "signal 9"})
    answer = incident.events.get(kind=EventKind.ANSWER)
    assert (answer.details["answer"], answer.details["agreed"]) == ("killed", False)
    assert answer.details["note"] == "signal 9"
    # The form shows the recorded answer selected, and its button says what it records.
    why = _question(_guided(client.get(incident.get_absolute_url()).content.decode()), "why")
    assert re.search(r'<option value="killed" selected>', why)
    assert re.search(r">Override</button>", why)
    assert "Overridden: <strong>Killed with SIGKILL" in why


def test_answers_and_the_decision_carry_to_the_next_snapshot(
    as_user, bob, stalled, django_capture_on_commit_callbacks
):
    incident, first = stalled
    client = as_user(bob)
    url = f"/incidents/{incident.pk}/snapshots/{first.pk}/guided/"
    client.post(url, {"q": "who", "answer": "suspect"})
    client.post(url, {"q": "why", "answer": "killed", "note": "signal 9"})
    snapshot_record_decision(snapshot=first, by=bob, classification="A", note="rank 3 left")
    second = _second_snapshot(incident, django_capture_on_commit_callbacks, "outside")

    html = client.get(incident.get_absolute_url()).content.decode()
    panel = _guided(html)
    assert f"snapshot {second.pk}" in panel
    assert "2 of 4 answered (2 on an earlier snapshot)" in panel
    why = _question(panel, "why")
    assert f"answered on snapshot {first.pk}" in why and "signal 9" in why
    assert re.search(r'<option value="killed" selected>', why)
    assert f"decided on snapshot {first.pk}" in html  # the class decision carried too
    # The snapshot page shows them.
    page = client.get(f"/snapshots/{second.pk}/").content.decode()
    answers = page.split('id="answers"', 1)[1]
    assert "Killed with SIGKILL" in answers and f"answered on snapshot {first.pk}" in answers
    assert f"decided on snapshot {first.pk}" in page


def test_an_answer_the_new_evidence_contradicts_is_asked_again(
    as_user, bob, stalled, django_capture_on_commit_callbacks
):
    incident, first = stalled
    client = as_user(bob)
    url = f"/incidents/{incident.pk}/snapshots/{first.pk}/guided/"
    client.post(url, {"q": "who", "answer": "suspect"})  # rank 3
    client.post(url, {"q": "others_wait", "answer": "yes"})
    # The second snapshot names rank 2 as the one that left, and says the others do not wait.
    _second_snapshot(incident, django_capture_on_commit_callbacks, "crash")
    panel = _guided(client.get(incident.get_absolute_url()).content.decode())
    assert "0 of 4 answered" in panel
    who = _question(panel, "who")
    assert f"On snapshot {first.pk} bob answered <strong>Rank 3 on lab-node-0</strong>" in who
    assert re.search(r'<option value="suspect" selected>Rank 2', who)
