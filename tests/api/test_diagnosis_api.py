"""The diagnosis as the API serves it: today's shape whatever version stored it, and every field
it serves documented by the serializer the OpenAPI schema is built from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient

from analysis import diagnose
from analysis.diagnosis import Diagnosis
from analysis.records import RankStatus
from analysis.schema import DIAGNOSIS_SCHEMA_VERSION
from collectors.bundles import read_bundle
from collectors.diagnosis_serializers import DiagnosisSerializer
from collectors.models import Snapshot, SnapshotStatus
from core.services import api_token_create
from incidents.services import incident_open

pytestmark = pytest.mark.django_db

ANALYSIS_TESTS = Path(__file__).parents[1] / "analysis"
STORED = sorted((ANALYSIS_TESTS / "stored").glob("*.json"))
RICH_CASES = (
    "18-nccl-net-plugin-differs",
    "28-flight-recorder-mismatch-captured",
    "01-watchdog-optype-differs",
)


def _client(user) -> APIClient:
    client = APIClient()
    _, secret = api_token_create(user=user, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _stored_snapshot(cluster, bob, diagnosis: dict) -> Snapshot:
    incident = incident_open(cluster=cluster, title="old row", opened_by=bob)
    return Snapshot.objects.create(
        incident=incident, cluster=cluster, status=SnapshotStatus.DONE, diagnosis=diagnosis
    )


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_an_old_stored_diagnosis_is_served_in_todays_shape(path, cluster, bob, carol):
    stored = json.loads(path.read_text())
    snapshot = _stored_snapshot(cluster, bob, stored)
    response = _client(carol).get(f"/api/v1/snapshots/{snapshot.pk}/diagnosis/")
    assert response.status_code == 200
    served = response.json()
    assert served["schema_version"] == DIAGNOSIS_SCHEMA_VERSION
    # A small job's table is whole in the answer (a large one's: its first page).
    assert served.pop("per_rank_next") is None
    assert served.pop("per_rank_total") == len(served["per_rank"])
    assert served == json.loads(json.dumps(Diagnosis.from_json(stored).to_json()))
    assert served["classification"] == stored["classification"]
    assert {row["status"] for row in served["per_rank"]} <= {s.value for s in RankStatus}


def _undocumented(value, field, where: str) -> list[str]:
    """Keys of `value` (served JSON) that `field` (a serializer field) does not document."""
    if isinstance(field, serializers.ListSerializer):
        return [k for item in value or [] for k in _undocumented(item, field.child, where + "[]")]
    if isinstance(field, serializers.Serializer):
        if value is None:
            return []
        gaps = [f"{where}.{key}" for key in value if key not in field.fields]
        for key, child in field.fields.items():
            if key in value:
                gaps += _undocumented(value[key], child, f"{where}.{key}")
        return gaps
    if isinstance(field, serializers.ListField) and isinstance(field.child, serializers.Serializer):
        return [k for item in value or [] for k in _undocumented(item, field.child, where + "[]")]
    return []


@pytest.mark.parametrize("case", RICH_CASES)
def test_every_served_field_is_documented(case):
    served = diagnose(read_bundle(ANALYSIS_TESTS / "corpus" / case)).to_json()
    assert _undocumented(served, DiagnosisSerializer(), "diagnosis") == []
    documented = set(DiagnosisSerializer().fields)
    assert documented == set(served), "and every documented field is served"
