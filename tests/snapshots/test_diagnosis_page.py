"""The diagnosis on the incident page: verdict, four questions, chart, groups, decisions."""

import json

import pytest

from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.models import EventKind
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def analysed(bob, cluster, django_capture_on_commit_callbacks):
    def make(scenario: str):
        incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
        with django_capture_on_commit_callbacks():
            snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot(scenario))
        snapshot_analyse(snapshot_id=snapshot.pk)
        snapshot.refresh_from_db()
        return incident, snapshot

    return make


def test_the_incident_page_explains_a_rank_stuck_outside_the_collective(as_user, bob, analysed):
    incident, _ = analysed("outside")
    page = as_user(bob).get(incident.get_absolute_url()).content.decode()
    assert "INVALID_TEMPLATE_VARIABLE" not in page
    assert "A · a rank left or stalled outside the collective" in page
    assert "suspects: ranks <strong>3</strong>" in page
    assert "All present, but rank 3 is outside the collective (SlowLoader.__next__)" in page
    assert "Dead: nothing moved." in page
    assert "never reached by ranks <strong>3</strong>" in page  # the flight recorder's word
    assert "Where it stops: ranks <strong>3</strong>; waiting because of it: ranks 0-2" in page
    assert "<strong>0-2</strong>" in page  # the stack group waiting in all_reduce


def test_the_chart_gets_a_figure_with_every_rank(as_user, bob, analysed):
    incident, _ = analysed("mismatch")
    page = as_user(bob).get(incident.get_absolute_url()).content.decode()
    start = page.index('id="rank-timeline-figure"')
    figure = json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)])
    assert sorted({y for trace in figure["data"] for y in trace["y"]}) == [0, 1, 2, 3]
    ringed = [t for t in figure["data"] if "suspect" in t.get("name", "").lower()]
    assert [t["y"] for t in ringed] == [[0]]  # rank 0 ran the extra broadcast
    # plotly's basic bundle, fetched by rank-timeline.js after load, never a <script> that
    # blocks the page
    assert 'data-plotly-src="/static/vendor/plotly-basic-4.1.1.min.js"' in page
    assert "plotly.min.js" not in page and '<script src="/static/vendor/plotly' not in page


def test_a_responder_records_a_decision_that_overrides_the_verdict(as_user, bob, analysed):
    incident, snapshot = analysed("mismatch")
    client = as_user(bob)
    client.post(
        f"/snapshots/{snapshot.pk}/decision/", {"classification": "C", "note": "IB flapping"}
    )
    decision = incident.events.get(kind=EventKind.DECISION)
    assert decision.pinned and decision.author == bob
    assert decision.details == {
        "snapshot": snapshot.pk,
        "classification": "C",
        "suggested": "B",
        "agreed": False,
        "note": "IB flapping",
    }
    assert decision.summary.endswith(
        "overrode B with C · configuration differs between ranks — IB flapping"
    )
    response = client.post(
        f"/snapshots/{snapshot.pk}/decision/", {"classification": "Z"}, follow=True
    )
    assert "classification must be one of" in response.content.decode()
    assert incident.events.filter(kind=EventKind.DECISION).count() == 1


def test_a_viewer_sees_the_verdict_but_cannot_decide(as_user, carol, analysed):
    incident, snapshot = analysed("mismatch")
    client = as_user(carol)
    assert "Record decision" not in client.get(incident.get_absolute_url()).content.decode()
    assert (
        client.post(f"/snapshots/{snapshot.pk}/decision/", {"classification": "B"}).status_code
        == 403
    )


def test_the_snapshot_page_summarises_nodes_and_lists_one_nodes_artifacts(as_user, bob, analysed):
    _, snapshot = analysed("mismatch")
    client = as_user(bob)
    page = client.get(f"/snapshots/{snapshot.pk}/").content.decode()
    assert "INVALID_TEMPLATE_VARIABLE" not in page
    assert '<a href="?node=lab-node-0#raw">lab-node-0</a>' in page
    assert "environ/" not in page  # artifacts are listed for one node at a time
    node_page = client.get(f"/snapshots/{snapshot.pk}/?node=lab-node-0").content.decode()
    assert node_page.count("<code>environ/") == 4
    assert "<code>ps.txt</code>" in node_page


def test_the_incident_list_shows_each_incidents_latest_verdict_in_fixed_queries(
    as_user, bob, analysed, django_assert_max_num_queries
):
    analysed("mismatch")
    analysed("outside")
    client = as_user(bob)
    with django_assert_max_num_queries(12):
        page = client.get("/").content.decode()
    # plain names, the class's one-sentence explanation as a tooltip
    assert ">B · ranks in different collectives</abbr>" in page
    assert ">A · a rank left or stalled outside the collective</abbr>" in page
    assert 'title="Every rank is alive, but they wait in different collectives' in page
