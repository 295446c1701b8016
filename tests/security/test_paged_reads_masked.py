"""The per-rank table's new readers (the API's pages, a rank's page, the environment page)
serve what was stored, masked: no secret the nodes held reaches a viewer or a responder's
page through them."""

import pytest
from django.urls import reverse

from tests.security.conftest import HF, PASSWORD
from tests.security.test_evidence_secrets import _api, _leaks

pytestmark = pytest.mark.django_db


def test_the_paged_table_and_the_rank_pages_carry_no_secret(
    leaky_snapshot, bobs_token, bob, carol, as_user
):
    api = _api(carol)  # a viewer
    ranks = api.get(f"/api/v1/snapshots/{leaky_snapshot.pk}/ranks/?limit=1000")
    assert ranks.status_code == 200 and ranks.json()["results"]
    diagnosis = api.get(f"/api/v1/snapshots/{leaky_snapshot.pk}/diagnosis/")
    assert diagnosis.status_code == 200 and diagnosis.json()["per_rank_next"] is None
    responder = as_user(bob)
    incident = leaky_snapshot.incident_id
    pages = [
        responder.get(reverse("pages:guided_rank", args=[incident, leaky_snapshot.pk, rank]))
        for rank in (0, 1, 999)
    ]
    pages.append(responder.get(reverse("pages:guided_env", args=[incident, leaky_snapshot.pk])))
    for answer in [ranks, diagnosis, *pages]:
        assert answer.status_code == 200
        assert _leaks(answer.content, bobs_token, HF, PASSWORD) == []
    env = pages[-1].content.decode()
    assert "HANGDESK_TOKEN" in env and "[REDACTED:" in env  # shown to differ, masked
