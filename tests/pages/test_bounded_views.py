"""Every view beside the incident page reads a large job's snapshot without its whole per-rank
table (12 MB of JSON at 32,000 ranks, stored apart in chunks): the diagnosis head, a rank's
row from the one chunk that holds it, the table a page at a time. Each view's content stays
what it was."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analysis.records import RankRow
from collectors import rankstore, selectors
from collectors.models import RankChunk, Snapshot
from incidents.services import incident_open
from tests.pages.fleet import fleet_diagnosis, fleet_snapshot
from tests.pages.test_evidence_viewer import crashed  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

WORLD, SUSPECT, MISSING = 2_000, 1_207, 1_733
FAR = 1_500  # a rank no overview row holds (the overview: flagged rows, then ranks 0-199)

# The per-rank table's chunks read without a bound (every chunk: the whole table).
CHUNKS_READ = re.compile(r'FROM "collectors_rankchunk"')
BOUNDED = re.compile(r'"collectors_rankchunk"\."(first" <|rank_lo" <=)')


class _Whole:
    @staticmethod
    def search(sql: str) -> bool:
        return bool(CHUNKS_READ.search(sql)) and not BOUNDED.search(sql) and "DELETE" not in sql


WHOLE_DIAGNOSIS = _Whole()


@pytest.fixture
def fleet(bob, cluster):
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    diagnosis = fleet_diagnosis(WORLD, suspect=SUSPECT, missing=MISSING)
    return incident, fleet_snapshot(incident, cluster, diagnosis), diagnosis


def whole_reads(client, url: str, *, status: int = 200) -> list[str]:
    """The queries of one GET that read the whole per-rank table."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == status, (url, response.status_code)
    return [q["sql"][:160] for q in queries if WHOLE_DIAGNOSIS.search(q["sql"])]


def test_a_ranks_row_is_found_in_the_database_when_no_overview_row_holds_it(fleet):
    _, snapshot, diagnosis = fleet
    light = Snapshot.objects.for_pages().get(pk=snapshot.pk)
    assert light.read_diagnosis().rank_row(FAR) is None  # not among the rows it was read with
    with CaptureQueriesContext(connection) as queries:
        row = selectors.rank_row(light, FAR)
    assert len(queries) == 1 and not WHOLE_DIAGNOSIS.search(queries[0]["sql"])
    assert row.to_json() == diagnosis["per_rank"][FAR]
    assert selectors.rank_row(light, SUSPECT).suspect  # the overview's, no query
    assert selectors.rank_row(light, WORLD + 5) is None
    assert "diagnosis" in light.get_deferred_fields()


def test_a_ranks_row_is_read_from_the_one_chunk_whose_ranks_hold_it(fleet):
    _, snapshot, diagnosis = fleet
    assert RankChunk.objects.filter(snapshot=snapshot).count() == -(-WORLD // rankstore.CHUNK_ROWS)
    with CaptureQueriesContext(connection) as queries:
        assert snapshot.rank_row_json(FAR) == diagnosis["per_rank"][FAR]
    assert len(queries) == 1 and BOUNDED.search(queries[0]["sql"])
    assert snapshot.rank_row_json(WORLD + 5) is None


def test_the_guided_pages_read_no_whole_table(client, bob, fleet):
    incident, snapshot, _ = fleet
    client.force_login(bob)
    far = reverse("pages:guided_rank", args=[incident.pk, snapshot.pk, FAR])
    assert whole_reads(client, far) == []
    html = client.get(far).content.decode()
    assert f"Rank {FAR} on node-{FAR // 8:04d}" in html and "status in_collective" in html
    suspect = client.get(reverse("pages:guided_rank", args=[incident.pk, snapshot.pk, SUSPECT]))
    assert f"Rank {SUSPECT} on node-{SUSPECT // 8:04d}" in suspect.content.decode()
    env = reverse("pages:guided_env", args=[incident.pk, snapshot.pk])
    assert whole_reads(client, env) == []
    answer = reverse("pages:guided_answer", args=[incident.pk, snapshot.pk])
    with CaptureQueriesContext(connection) as queries:
        posted = client.post(answer, {"q": "who", "action": "confirm"})
    assert posted.status_code == 302
    assert not [q for q in queries if WHOLE_DIAGNOSIS.search(q["sql"])]
    assert incident.events.get(kind="answer").details["answer"] == "suspect"


def test_the_post_mortems_first_draft_finds_the_last_step_in_the_whole_table(client, bob, cluster):
    """The draft reads the diagnosis without its table, and of the table only the latest step
    stamp (here a rank no overview row holds)."""
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    diagnosis = fleet_diagnosis(WORLD, suspect=SUSPECT, missing=MISSING)
    for row in diagnosis["per_rank"]:
        row["last_step_at"] = "2026-11-30T09:00:00+00:00"
    diagnosis["per_rank"][FAR]["last_step_at"] = "2026-11-30T10:17:42+01:00"  # 09:17:42 UTC
    snapshot = fleet_snapshot(incident, cluster, diagnosis)
    assert selectors.last_step_at(snapshot).isoformat() == "2026-11-30T10:17:42+01:00"
    client.force_login(bob)
    url = reverse("pages:postmortem", args=[incident.pk])
    assert whole_reads(client, url) == []
    page = client.get(url).content.decode()
    assert "2026-11-30 10:17:42 | Last step line written" in page


def test_the_rank_stamps_are_gathered_when_the_table_is_stored():
    rows = [{"rank": 0, "last_step_at": "a"}, {"rank": 1}, {"rank": 2, "last_step_at": "a"}]
    assert rankstore.field_values(rows) == {"last_step_at": ["a"]}
    assert rankstore.field_values(rows, ("rank",)) == {"rank": [0, 1, 2]}


def test_the_evidence_viewer_reads_no_whole_table(client, bob, crashed):  # noqa: F811
    crashed = crashed[1]
    client.force_login(bob)
    evidence = crashed.diagnosis["evidence"]
    at = next(i for i, e in enumerate(evidence) if e["kind"] == "exit_code")
    quote = reverse("collectors:quote", args=[crashed.pk, at])
    assert whole_reads(client, quote) == []
    body = client.get(quote).content.decode()
    assert f'class="quoted" data-quote="{at}"' in body  # the line still marked
    artifact = crashed.collections.first().artifacts.order_by("name").first()
    view = reverse("collectors:artifact_view", args=[crashed.pk, artifact.pk])
    assert whole_reads(client, view) == []
    assert (
        f'href="{crashed.incident.get_absolute_url()}#diagnosis"'
        in client.get(view).content.decode()
    )


def _api(user):
    from rest_framework.test import APIClient

    from core.services import api_token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t')[1]}")
    return client


def test_the_api_serves_the_table_a_page_at_a_time(bob, carol, fleet):
    from collectors.apis import RANK_PAGE

    _, snapshot, diagnosis = fleet
    api = _api(carol)
    url = f"/api/v1/snapshots/{snapshot.pk}/diagnosis/"
    assert whole_reads(api, url) == []
    served = api.get(url).json()
    assert served["summary"] == diagnosis["summary"] and served["suspect_ranks"] == [SUSPECT]
    assert [r["rank"] for r in served["per_rank"]] == list(range(RANK_PAGE))
    assert served["per_rank_total"] == WORLD
    ranks = f"http://testserver/api/v1/snapshots/{snapshot.pk}/ranks/"
    assert served["per_rank_next"] == f"{ranks}?offset={RANK_PAGE}&limit={RANK_PAGE}"
    rows, page = list(served["per_rank"]), served["per_rank_next"]
    while page:  # follow `next` to the end
        assert whole_reads(api, page) == []
        answer = api.get(page).json()
        rows += answer["results"]
        page = answer["next"]
    first = api.get(f"{ranks}?limit={RANK_PAGE}").json()["results"]
    assert first == served["per_rank"]  # the diagnosis' first page is the ranks' first page
    typed = [RankRow.from_json(r).to_json() for r in diagnosis["per_rank"]]
    assert rows == json.loads(json.dumps(typed))  # every row, in today's shape
    assert [r["rank"] for r in rows] == list(range(WORLD))
    assert rows[SUSPECT]["suspect"] and rows[MISSING]["status"] == "missing"
    last = api.get(f"{ranks}?offset={WORLD - 3}&limit=10").json()
    assert [r["rank"] for r in last["results"]] == [WORLD - 3, WORLD - 2, WORLD - 1]
    assert last["next"] is None and last["count"] == WORLD
    assert last["previous"] == f"{ranks}?offset={WORLD - 13}&limit=10"
    assert api.get(f"{ranks}?offset={WORLD + 5}").json()["results"] == []
    for junk in ("limit=0", "limit=1001", "offset=-1", "offset=x"):
        assert api.get(f"{ranks}?{junk}").status_code == 400, junk
    detail = f"/api/v1/snapshots/{snapshot.pk}/"
    assert whole_reads(api, detail) == []
    assert api.get(detail).json()["classification"] == diagnosis["classification"]


def test_the_incident_snapshot_and_document_pages_read_no_whole_table(client, bob, fleet):
    """The pages fixed before (the incident page, the snapshot page, the rank table, the live
    poll) and the frozen documents: none reads the table whole."""
    from incidents.postmortem_saving import postmortem_save
    from incidents.services import incident_change_status
    from sharing.services import share_link_create

    incident, snapshot, _ = fleet
    client.force_login(bob)
    detail = reverse("collectors:detail", args=[snapshot.pk])
    live = reverse("pages:incident_live", args=[incident.pk])
    for url in (
        incident.get_absolute_url(),
        detail,
        f"{detail}?node=node-0150",
        reverse("collectors:ranks", args=[snapshot.pk]) + "?page=7",
        f"{live}?version=0&verdict=",
    ):
        assert whole_reads(client, url) == [], url
    incident_change_status(incident=incident, to_status="resolved", by=bob)
    sections = {
        "summary": "Rank 1207 stopped.",
        "root_cause": "Its host ran out of memory.",
        "action_items": "Drain it | bob | 2026-12-14",
    }
    postmortem_save(incident=incident, by=bob, status="published", **sections)
    _, token = share_link_create(incident=incident, by=bob, include_evidence=True)
    for url in (
        reverse("pages:postmortem", args=[incident.pk]),
        reverse("sharing:print", args=[incident.pk]),
        reverse("sharing:export", args=[incident.pk]),
        f"/s/{token}/",
    ):
        assert whole_reads(client, url) == [], url
    assert (
        f"Ranks seen: {WORLD - 1} of {WORLD}"
        in client.get(reverse("sharing:export", args=[incident.pk])).content.decode()
    )


def test_the_incident_list_reads_each_verdict_from_its_column(client, bob, fleet):
    """`diagnosis -> 'classification'` decompressed each listed incident's whole diagnosis; the
    class is a generated column the database keeps with every write of the diagnosis."""
    from incidents.models import Incident

    incident, snapshot, diagnosis = fleet
    client.force_login(bob)
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse("pages:incident_list")).content.decode()
    # Neither the column nor a key of it, whatever the (sub)query's table alias.
    reads = re.compile(r'\."diagnosis"(,| FROM|\s*->)')
    assert not [q["sql"][:160] for q in queries if reads.search(q["sql"])]
    assert incident.title in html
    listed = selectors.with_latest_verdict(Incident.objects.filter(pk=incident.pk)).get()
    assert listed.verdict == diagnosis["classification"] == "A"
    Snapshot.objects.filter(pk=snapshot.pk).update(diagnosis={**diagnosis, "classification": "C"})
    assert (
        selectors.with_latest_verdict(Incident.objects.filter(pk=incident.pk)).get().verdict == "C"
    )


def test_the_schema_documents_the_paging(as_user, carol):
    schema = as_user(carol).get("/api/schema/", HTTP_ACCEPT="application/json").json()
    ranks = schema["paths"]["/api/v1/snapshots/{snapshot_pk}/ranks/"]["get"]
    assert {p["name"] for p in ranks["parameters"]} >= {"offset", "limit"}
    ref = ranks["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    page = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(page["properties"]) == {"count", "offset", "limit", "next", "previous", "results"}
    diagnosis = schema["paths"]["/api/v1/snapshots/{snapshot_pk}/diagnosis/"]["get"]
    ref = diagnosis["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    served = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]
    assert {"per_rank", "per_rank_total", "per_rank_next"} <= set(served)
