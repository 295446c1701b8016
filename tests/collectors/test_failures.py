"""Nodes that cannot be collected: a clear status, nothing raised, a typed failure whose kind
says whether a retry may help."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from analysis.evidence import GATHERED, not_gathered
from clusters.sshspec import fingerprint
from collectors.outcomes import FailureKind
from collectors.visits import ssh_visit

from .conftest import free_port, keygen, wait_for


def _failed(visit, kind: FailureKind):
    """The visit's evidence, after checking its failure is of `kind` and says the status."""
    assert visit.failure is not None, visit.evidence.status
    assert visit.failure.kind is kind, visit.failure
    assert visit.evidence.status == not_gathered(visit.failure.text)
    return visit.evidence


def _nothing_collected(evidence) -> None:
    assert evidence.ps is None
    assert evidence.environ == {} and evidence.pyspy == {} and evidence.logs == {}
    assert evidence.dmesg is None and evidence.hostname == ""


def test_it_marks_a_refused_connection_unreachable(sshd, ranks):
    visit = ssh_visit(sshd.target(port=free_port()), ranks.plan())
    evidence = _failed(visit, FailureKind.UNREACHABLE)
    assert evidence.status.note.startswith("unreachable: connection refused by 127.0.0.1:")
    assert visit.failure.transient
    _nothing_collected(evidence)


def _wedged_server(greeting: bytes):
    """Accepts TCP connections, sends `greeting`, then never says another word."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept():
        with contextlib.suppress(OSError):
            conn = server.accept()[0]
            accepted.append(conn)
            conn.sendall(greeting)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    for conn in accepted:
        conn.close()
    thread.join(timeout=5)


@pytest.fixture
def silent_server():
    yield from _wedged_server(b"")


@pytest.fixture
def banner_only_server():
    yield from _wedged_server(b"SSH-2.0-OpenSSH_9.2 wedged\r\n")


def test_it_gives_up_on_a_node_that_never_speaks_ssh(sshd, ranks, silent_server):
    started = time.monotonic()
    visit = ssh_visit(
        sshd.target(port=silent_server), ranks.plan(connect_timeout_s=1, total_timeout_s=5)
    )
    assert time.monotonic() - started < 4
    evidence = _failed(visit, FailureKind.UNREACHABLE)
    assert evidence.status.note.startswith("unreachable: no SSH banner"), evidence.status
    assert visit.failure.transient


@pytest.fixture
def hanging_up_server():
    """Accepts TCP connections and closes them at once, as a forwarder with nothing behind it."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            with contextlib.suppress(OSError):
                server.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()
    thread.join(timeout=5)


def test_a_port_that_hangs_up_is_not_called_a_silent_server(sshd, ranks, hanging_up_server):
    visit = ssh_visit(
        sshd.target(port=hanging_up_server), ranks.plan(connect_timeout_s=10, total_timeout_s=20)
    )
    evidence = _failed(visit, FailureKind.UNREACHABLE)
    assert "accepted the connection and closed it after 0." in evidence.status.note, evidence.status
    assert "within 10s" not in evidence.status.note


def test_it_gives_up_on_a_node_that_stalls_in_the_handshake(sshd, ranks, banner_only_server):
    started = time.monotonic()
    visit = ssh_visit(
        sshd.target(port=banner_only_server), ranks.plan(connect_timeout_s=1, total_timeout_s=5)
    )
    assert time.monotonic() - started < 4
    evidence = _failed(visit, FailureKind.UNREACHABLE)
    assert evidence.status.note.startswith("unreachable: SSH handshake with 127.0.0.1:"), (
        evidence.status
    )


def test_it_refuses_a_node_whose_host_key_does_not_match(sshd, ranks, tmp_path):
    impostor = keygen(tmp_path / "other_host_ed25519")
    log_before = len(sshd.log())
    visit = ssh_visit(sshd.target(host_key=impostor.public_line), ranks.plan())

    expected, got = fingerprint(impostor.public_line), fingerprint(sshd.host_key.public_line)
    evidence = _failed(visit, FailureKind.HOST_KEY)
    assert (
        evidence.status.note == f"host key mismatch: expected {expected}, got {got} (ssh-ed25519)"
    )
    assert not visit.failure.transient
    _nothing_collected(evidence)
    # Refused before authentication: sshd saw the connection close in pre-auth, no key offered.
    session = wait_for(
        lambda: "[preauth]" in sshd.log()[log_before:] and sshd.log()[log_before:],
        timeout=5,
        what="sshd to log the closed connection",
    )
    assert "publickey" not in session and "Accepted" not in session


def test_it_refuses_a_host_key_of_another_type(sshd, ranks, tmp_path):
    impostor = keygen(tmp_path / "other_host_ecdsa", kind="ecdsa")
    evidence = _failed(
        ssh_visit(sshd.target(host_key=impostor.public_line), ranks.plan()), FailureKind.HOST_KEY
    )
    assert evidence.status.note.startswith(
        f"host key mismatch: expected {fingerprint(impostor.public_line)}, got SHA256:"
    ), evidence.status
    _nothing_collected(evidence)


def test_it_does_not_connect_without_a_valid_host_key(sshd, ranks):
    evidence = _failed(ssh_visit(sshd.target(host_key=""), ranks.plan()), FailureKind.HOST_KEY)
    assert evidence.status.note.startswith("host key invalid: ")


def test_it_reports_an_unauthorised_client_key_as_auth_failure(sshd, ranks, tmp_path):
    stranger = keygen(tmp_path / "stranger_ed25519")
    visit = ssh_visit(sshd.target(key_path=str(stranger.private)), ranks.plan())
    evidence = _failed(visit, FailureKind.AUTH)
    assert evidence.status.note.startswith("auth failed: root@node-under-test"), evidence.status
    assert not visit.failure.transient
    _nothing_collected(evidence)


def test_it_reports_a_missing_key_file_without_connecting(sshd, ranks, tmp_path):
    visit = ssh_visit(sshd.target(key_path=str(tmp_path / "absent")), ranks.plan())
    assert _failed(visit, FailureKind.AUTH).status.note == (
        f"auth failed: cannot load private key {tmp_path / 'absent'}: No such file or directory"
    )


def test_it_never_puts_private_key_material_in_the_status(sshd, ranks, tmp_path):
    # A file that looks like a key but is not one: the error must not echo its content.
    broken = tmp_path / "broken_key"
    secret = "c2VjcmV0LWtleS1tYXRlcmlhbA"
    broken.write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{secret}\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    evidence = _failed(ssh_visit(sshd.target(key_path=str(broken)), ranks.plan()), FailureKind.AUTH)
    assert evidence.status.note.startswith(f"auth failed: cannot load private key {broken}")
    assert secret not in evidence.status.note


@pytest.fixture
def ssh_agent(tmp_path, monkeypatch):
    """A real ssh-agent on a private socket, stopped by pid."""
    socket_path = tmp_path / "agent.sock"
    output = subprocess.run(
        ["ssh-agent", "-s", "-a", str(socket_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    pid = int(output.split("SSH_AGENT_PID=")[1].split(";")[0])
    monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
    yield socket_path
    os.kill(pid, signal.SIGTERM)


def test_it_authenticates_with_the_ssh_agent_when_no_key_path_is_given(sshd, ranks, ssh_agent):
    subprocess.run(["ssh-add", "-q", str(sshd.client_key.private)], check=True, timeout=10)
    visit = ssh_visit(sshd.target(key_path=None), ranks.plan())
    assert visit.failure is None and visit.evidence.status == GATHERED, visit.evidence.status
    assert set(ranks.pids) <= set(visit.evidence.pyspy)


def test_it_reports_auth_failure_without_key_path_or_agent(sshd, ranks, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    evidence = _failed(ssh_visit(sshd.target(key_path=None), ranks.plan()), FailureKind.AUTH)
    assert evidence.status.note == (
        "auth failed: root@node-under-test: no key_path and no key in the ssh-agent"
    )


def test_it_reports_an_unusable_plan_instead_of_raising(sshd, ranks):
    visit = ssh_visit(sshd.target(), ranks.plan(log_globs=["relative/*.log"]))
    evidence = _failed(visit, FailureKind.INVALID_PLAN)
    assert (
        evidence.status.note
        == "invalid plan: glob must be an absolute path on one line: " + repr("relative/*.log")
    )
    assert not visit.failure.transient
    _nothing_collected(evidence)


def test_only_network_failures_are_worth_a_retry():
    transient = {kind for kind in FailureKind if kind.transient}
    assert transient == {
        FailureKind.UNREACHABLE,
        FailureKind.CONNECTION_LOST,
        FailureKind.SSH_ERROR,
    }


def test_a_login_not_answered_in_time_is_unreachable_and_a_refused_key_is_auth():
    # paramiko's words when the server never answers the login within auth_timeout (a node's
    # sshd too busy: many visits at once) against its words for a refused key.
    import paramiko

    from clusters.sshspec import NodeTarget
    from collectors.remote import _auth_failure

    target = NodeTarget("n1", "127.0.0.9", 2222, "root", key_path=None, host_key="")
    slow = _auth_failure(paramiko.AuthenticationException("Authentication timeout."), target, 10)
    assert slow.failure.kind is FailureKind.UNREACHABLE and slow.failure.transient
    assert slow.failure.text == "unreachable: 127.0.0.9:2222 did not answer the login within 10s"
    refused = _auth_failure(paramiko.AuthenticationException("Authentication failed."), target, 10)
    assert refused.failure.kind is FailureKind.AUTH and not refused.failure.transient
