"""The security suite's world beside tests/conftest.py's: a snapshot whose evidence holds a
responder's API token, a Hugging Face token and a password (issue 11's finding)."""

import pytest

# Models and services are imported inside the fixtures, as in tests/conftest.py.

HF = "hf_" + "Zq8RkW2mXv7LpT4nYb9CdF3sGh6JkQ1e"
PASSWORD = "correct-horse-battery"


@pytest.fixture
def incident(bob, cluster):
    from incidents.services import incident_open

    return incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")


@pytest.fixture
def bobs_token(bob):
    """What the README tells a job to do: keep a responder's token in its environment."""
    from core.services import api_token_create

    return api_token_create(user=bob, name="watchdog")[1]


@pytest.fixture
def leaky_snapshot(incident, bobs_token, django_capture_on_commit_callbacks):
    from collectors.services import snapshot_analyse
    from collectors.starts import snapshot_import_bundle
    from tests.analysis.sample_evidence import load_snapshot

    evidence = load_snapshot("mismatch")
    node = evidence.nodes[0]
    for pid in node.environ:
        node.environ[pid] += f"HANGDESK_TOKEN={bobs_token}\0HF_TOKEN={HF}\0".encode()
    node.ps += f"\n 4242     1 S   100 python train.py --password={PASSWORD} --hf-token {HF}\n"
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=evidence)
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    return snapshot
