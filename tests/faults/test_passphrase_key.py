"""A passphrase-protected private key: the worker cannot type the passphrase at 3 a.m.

Before: paramiko handed the key to cryptography, whose TypeError ("Key is password-protected,
but password was not provided") escaped the collector as "internal error". Must hold: the node
fails with a clear auth failure naming the remedy, nothing is raised, no connection is made
when the file says so; and the node form / API / import refuse such a key when the key file is
readable where they run."""

from __future__ import annotations

import subprocess

import pytest
from django.core.exceptions import ValidationError

from clusters.models import Node
from clusters.sshspec import PASSPHRASE_KEY_MESSAGE, private_key_is_encrypted, private_key_problem
from collectors.outcomes import FailureKind
from collectors.visits import ssh_visit


def _key(path, kind: str, passphrase: str, *extra: str):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, *extra, "-f", str(path)],
        check=True,
        timeout=60,
    )
    return path


# OpenSSH's own format (every type), and the legacy PEM format ssh-keygen -m PEM writes.
KINDS = [("ed25519", ()), ("ecdsa", ()), ("rsa", ()), ("rsa", ("-m", "PEM"))]


@pytest.mark.parametrize(("kind", "extra"), KINDS)
def test_an_encrypted_key_is_told_from_a_plain_one(tmp_path, kind, extra):
    locked = _key(tmp_path / "locked", kind, "correct horse", *extra)
    plain = _key(tmp_path / "plain", kind, "", *extra)
    assert private_key_is_encrypted(locked.read_text())
    assert not private_key_is_encrypted(plain.read_text())
    assert private_key_problem(str(locked)) == f"{locked}: {PASSPHRASE_KEY_MESSAGE}"
    assert private_key_problem(str(plain)) is None
    assert private_key_problem(str(tmp_path / "absent")) is None  # not readable here: no say


def test_garbage_that_claims_to_be_an_openssh_key_is_not_called_encrypted():
    for body in ("!!!", "b3BlbnNzaC1rZXktdjEA", "AAAA" * 3):
        text = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----"
        assert not private_key_is_encrypted(text)


@pytest.mark.parametrize(("kind", "extra"), KINDS)
def test_the_node_fails_with_a_clear_reason_instead_of_an_internal_error(
    sshd, ranks, tmp_path, kind, extra
):
    locked = _key(tmp_path / "locked", kind, "correct horse", *extra)
    visit = ssh_visit(sshd.target(key_path=str(locked)), ranks.plan())
    assert visit.failure is not None and visit.failure.kind is FailureKind.AUTH
    assert (
        visit.evidence.status.note == f"auth failed: private key {locked}: {PASSPHRASE_KEY_MESSAGE}"
    )
    assert not visit.failure.transient  # retrying cannot help


@pytest.mark.django_db
def test_node_validation_refuses_a_readable_passphrase_key(cluster, tmp_path):
    locked = _key(tmp_path / "locked", "ed25519", "correct horse")
    plain = _key(tmp_path / "plain", "ed25519", "")
    host_key = cluster.nodes.first().host_key
    node = Node(cluster=cluster, name="n-new", address="10.0.0.9", key_path=str(locked),
                host_key=host_key)  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        node.full_clean()
    assert refused.value.message_dict["key_path"] == [f"{locked}: {PASSPHRASE_KEY_MESSAGE}"]
    node.key_path = str(plain)
    node.full_clean()
    node.key_path = "/on/the/worker/machine/only"  # not readable here: left to the worker
    node.full_clean()
