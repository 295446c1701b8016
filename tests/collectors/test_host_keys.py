"""Host key lines as an admin pastes them: parsed, fingerprinted like OpenSSH, or refused."""

from __future__ import annotations

import subprocess

import pytest

from clusters.sshspec import InvalidHostKey, fingerprint, parse_host_key

from .conftest import keygen


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa", "rsa"])
def test_it_fingerprints_like_ssh_keygen(tmp_path, kind):
    key = keygen(tmp_path / f"host_{kind}", kind=kind)
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(key.private.with_suffix(".pub"))],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()[1]
    assert fingerprint(key.public_line) == listed
    assert parse_host_key(key.public_line).key_type == key.public_line.split()[0]


def test_it_accepts_a_known_hosts_line_with_host_names(tmp_path):
    key = keygen(tmp_path / "host")
    key_type, blob = key.public_line.split()[:2]
    parsed = parse_host_key(f"[10.0.0.7]:2222,gpu-7 {key_type} {blob}")
    assert parsed.fingerprint == fingerprint(key.public_line)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("", "expected '<key type> <base64 key>'"),
        ("ssh-ed25519", "expected '<key type> <base64 key>'"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "unsupported host key type 'ssh-dss'"),
        ("ssh-ed25519 not*base64", "not valid base64"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", "not a valid ssh-ed25519 public key"),
        ("@cert-authority *.lab ssh-ed25519 AAAA", "markers are not supported"),
    ],
)
def test_it_explains_what_is_wrong_with_a_host_key(line, reason):
    with pytest.raises(InvalidHostKey, match=reason.replace("*", r"\*")):
        parse_host_key(line)


def test_it_refuses_a_key_labelled_with_another_type(tmp_path):
    ecdsa_blob = keygen(tmp_path / "host_ecdsa", kind="ecdsa").public_line.split()[1]
    with pytest.raises(InvalidHostKey):
        parse_host_key(f"ssh-ed25519 {ecdsa_blob}")
