"""A node's evidence stored as artifacts (node_work.artifacts_insert, PostgreSQL's binary COPY)
reads back byte for byte: every byte value, non-ASCII names and text, empty pieces."""

import zlib

import pytest
from django.db import connection

from analysis.evidence import NodeEvidence
from collectors import services
from collectors.models import Artifact
from collectors.node_work import node_evidence_store
from hangdesk.artifacts import artifacts_from_evidence
from incidents.services import incident_open

pytestmark = pytest.mark.django_db


def test_stored_artifacts_read_back_byte_for_byte(bob, cluster):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    collection = services.snapshot_create(incident=incident, by=bob).snapshot.collections.first()
    dump = bytes(range(256)) * 300 + b"\x00\\\n\t\r"  # every byte, COPY's escapes among them
    evidence = NodeEvidence(
        node=collection.node_name,
        hostname="gpu-0",
        ps="  PID CMD\n  12 python train.py\n",
        logs={"/var/log/train/rank0 — été.log": "step 3 ✓\n" * 1000, "/var/log/empty.log": ""},
        flight_recorder={"/var/log/train/fr/rank_0": dump},
        truncated=["ps"],
    )
    node_evidence_store(collection=collection, evidence=evidence)

    stored = {
        a.name: (zlib.decompress(bytes(a.compressed)), a.size, a.truncated)
        for a in Artifact.objects.filter(collection=collection)
    }
    expected = {
        name: (content, len(content), truncated)
        for name, content, truncated in artifacts_from_evidence(evidence)
    }
    assert stored == expected
    assert any(content == dump for content, _, _ in stored.values())
    assert any(cut for _, _, cut in stored.values())


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a PostgreSQL column's TOAST compression"
)
def test_artifacts_are_compressed_by_postgresql_with_lz4_where_it_has_it():
    # pglz was most of a group's store (its artifacts' COPY): migration 0017.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        has_lz4 = cursor.fetchone()[0]
        cursor.execute(
            "SELECT attcompression FROM pg_attribute "
            "WHERE attrelid = 'collectors_artifact'::regclass AND attname = 'compressed'"
        )
        method = cursor.fetchone()[0]
    assert method == ("l" if has_lz4 else "")
