"""Host keys of the nodes a scheduler names come from the operator's known_hosts file, matched
as OpenSSH matches them; a host it lacks is refused, never trusted on first use."""

import subprocess

import pytest

from clusters.sshspec import KnownHostsError, known_host_key
from tests.conftest import HOST_KEY

OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def keygen_pub(tmp_path, name: str) -> str:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def test_plain_names_lists_and_ports(tmp_path):
    text = f"gpu001,10.1.0.1 {HOST_KEY} comment\n[gpu002]:2222 {OTHER}\n"
    assert known_host_key(text, "gpu001") == HOST_KEY
    assert known_host_key(text, "10.1.0.1") == HOST_KEY
    assert known_host_key(text, "gpu002", 2222) == OTHER
    with pytest.raises(KnownHostsError, match="no host key for gpu002"):
        known_host_key(text, "gpu002")  # port 22 is another entry
    with pytest.raises(KnownHostsError, match=r"\[gpu001\]:2222"):
        known_host_key(text, "gpu001", 2222)


def test_patterns_and_negation_as_openssh_reads_them():
    text = f"gpu*,!gpu666 {HOST_KEY}\nrack?-n1 {OTHER}\n"
    assert known_host_key(text, "gpu017") == HOST_KEY
    assert known_host_key(text, "GPU017") == HOST_KEY  # host names without case
    assert known_host_key(text, "rack1-n1") == OTHER
    for host in ("gpu666", "rack10-n1", "cpu1"):
        with pytest.raises(KnownHostsError):
            known_host_key(text, host)


def test_hashed_names_written_by_ssh_keygen(tmp_path):
    key = keygen_pub(tmp_path, "host")
    known = tmp_path / "known_hosts"
    known.write_text(f"gpu001 {key}\n[127.0.0.5]:2200 {key}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    text = known.read_text()
    assert "gpu001" not in text and text.startswith("|1|")
    assert known_host_key(text, "gpu001") == key
    assert known_host_key(text, "127.0.0.5", 2200) == key
    with pytest.raises(KnownHostsError):
        known_host_key(text, "gpu002")


def test_a_revoked_key_is_refused_and_a_cert_authority_is_no_host_key():
    text = (
        f"@cert-authority *.example {OTHER}\n"
        f"gpu001 {HOST_KEY}\n"
        f"@revoked gpu001 {HOST_KEY}\n"
        "# a comment\n\n"
        "gpu009 ssh-ed25519 not-base64!\n"
    )
    with pytest.raises(KnownHostsError, match="revoked"):
        known_host_key(text, "gpu001")
    with pytest.raises(KnownHostsError):
        known_host_key(text, "a.example")
    with pytest.raises(KnownHostsError):
        known_host_key(text, "gpu009")


def test_ed25519_is_preferred_when_a_host_has_several_keys(tmp_path):
    rsa = tmp_path / "rsa"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(rsa)], check=True
    )
    rsa_key = " ".join(rsa.with_suffix(".pub").read_text().split()[:2])
    text = f"gpu001 {rsa_key}\ngpu001 {HOST_KEY}\n"
    assert known_host_key(text, "gpu001") == HOST_KEY
    assert known_host_key(f"gpu001 {rsa_key}\n", "gpu001") == rsa_key
