"""The evidence viewer's page of one artifact, one read (collectors/evidence_viewer.
artifact_page -> ArtifactPage): its lines numbered, the verdict's quotes found in it, and no
query of its own (the artifact comes with its collection and snapshot)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.evidence_viewer import artifact_page, artifact_quoting, is_linkable
from collectors.models import Snapshot
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from hangdesk.masking import masked_artifact_text
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


def test_the_page_of_a_quoted_artifact_marks_the_quote_without_a_query(
    bob, cluster, django_capture_on_commit_callbacks
):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("crash"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    index = next(i for i, q in enumerate(snapshot.read_diagnosis().evidence) if is_linkable(q))
    artifact, line = artifact_quoting(snapshot, index)
    text = masked_artifact_text(artifact.name, artifact.content)
    with CaptureQueriesContext(connection) as queries:
        page = artifact_page(artifact, text, raw=False, line=line)
    assert len(queries) == 0
    assert page.line == line and page.node == artifact.collection.node_name and not page.raw
    assert index in [q["index"] for q in page.quotes]
    assert f'<tr id="L{line}" class="quoted"' in page.page.rows
    assert set(page.context()) == {
        "artifact", "snapshot", "node", "page", "job_started", "raw", "quotes", "line",
    }  # fmt: skip
