"""Host key lines as an admin pastes them: parsed, fingerprinted like OpenSSH, or refused."""

from __future__ import annotations

import base64
import subprocess

import paramiko
import pytest

from clusters.sshspec import InvalidHostKey, fingerprint, parse_host_key
from tests.collectors.conftest import keygen


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


@pytest.mark.parametrize(
    ("kind", "bits"), [("ecdsa", 256), ("ecdsa", 384), ("ecdsa", 521), ("rsa", 3072)]
)
def test_every_supported_key_reads_back_as_paramiko_reads_it(tmp_path, kind, bits):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-b", str(bits), "-N", "", "-f", str(tmp_path / "k")],
        check=True,
        timeout=60,
    )
    line = (tmp_path / "k.pub").read_text().strip()
    parsed = parse_host_key(line)
    # collectors/remote.py hands paramiko the parsed blob when it connects.
    key = paramiko.PKey.from_type_string(parsed.key_type, parsed.blob)
    assert key.asbytes() == parsed.blob
    assert parsed.line == f"{key.get_name()} {key.get_base64()}" == " ".join(line.split()[:2])


def _with_blob(line: str, change) -> str:
    key_type, encoded = line.split()[:2]
    return f"{key_type} {base64.b64encode(change(base64.b64decode(encoded))).decode()}"


@pytest.mark.parametrize(
    ("kind", "change", "reason"),
    [
        ("ecdsa", lambda blob: blob[:-1] + bytes([blob[-1] ^ 1]), "the point is not on nistp256"),
        ("ed25519", lambda blob: blob[:-1], "the key ends early"),
        ("ed25519", lambda blob: blob + b"\0", "unexpected bytes after the key"),
        ("rsa", lambda blob: blob[:-8], "the key ends early"),
    ],
)
def test_it_refuses_a_damaged_key_that_would_otherwise_pin_another_one(
    tmp_path, kind, change, reason
):
    line = _with_blob(keygen(tmp_path / "host", kind=kind).public_line, change)
    with pytest.raises(InvalidHostKey, match=reason):
        parse_host_key(line)


def test_it_refuses_a_line_longer_than_any_host_key():
    with pytest.raises(InvalidHostKey, match="at most"):
        parse_host_key("ssh-rsa " + "A" * 20_000)
