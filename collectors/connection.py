"""Checks an admin runs on a node before a snapshot needs it: does the private key file
exist where the worker looks for it, and does the SSH handshake the collector makes succeed
(pinned host key, the key's authentication)? Both run on a worker (collectors.tasks.node_check,
on the `ssh` queue, where the keys are); a page waits a few seconds for the answer."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass

from clusters.sshspec import InvalidHostKey, NodeTarget, parse_host_key, private_key_problem
from hangdesk.plan import CollectionPlan

from . import remote
from .outcomes import FailureKind


@dataclass
class CheckResult:
    ok: bool | None  # None: nobody answered, nothing is known
    text: str
    seconds: float = 0.0
    worker: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def key_file_problem(path: str) -> str | None:
    """What stops the worker from using the private key at `path`, as a sentence; None when
    the file is there, readable and needs no passphrase."""
    if not path:
        return None  # the ssh-agent's keys
    if not os.path.exists(path):
        return f"the key file {path} does not exist on the worker"
    if not os.path.isfile(path):
        return f"{path} is not a file"
    if not os.access(path, os.R_OK):
        return f"the worker cannot read {path} (permissions)"
    problem = private_key_problem(path)
    return f"the key {problem}" if problem else None


def check_key(spec: dict) -> CheckResult:
    problem = key_file_problem(spec.get("key_path") or "")
    if problem:
        return CheckResult(False, problem, worker=socket.gethostname())
    where = spec.get("key_path") or "the ssh-agent"
    return CheckResult(True, f"key {where} is usable on the worker", worker=socket.gethostname())


def check_connection(spec: dict) -> CheckResult:
    """The collector's own connection, up to authentication: TCP connect, the pinned host
    key, the key's login; then it closes without running anything."""
    started = time.monotonic()
    key = check_key(spec)
    if not key.ok:
        return key
    target = NodeTarget.from_json(spec)
    plan = CollectionPlan()
    host = socket.gethostname()
    try:
        host_key = parse_host_key(target.host_key)
    except InvalidHostKey as exc:
        return CheckResult(False, f"host key invalid: {exc}", worker=host)
    try:
        sock = remote._open_socket(target, plan.connect_timeout_s)
    except remote.CollectionError as exc:
        return CheckResult(False, exc.failure.text, time.monotonic() - started, host)
    watchdog = remote._Watchdog(sock, time.monotonic() + 3 * plan.connect_timeout_s)
    try:
        client = remote._connect(target, plan, sock, host_key)
        client.close()
    except remote.CollectionError as exc:
        text = exc.failure.text
        if watchdog.fired and exc.failure.kind is not FailureKind.AUTH:
            text = f"unreachable: no answer within {3 * plan.connect_timeout_s:g}s"
        return CheckResult(False, text, time.monotonic() - started, host)
    finally:
        watchdog.cancel()
        sock.close()
    seconds = time.monotonic() - started
    text = (
        f"connected to {target.address}:{target.port} as {target.username}: host key "
        f"{host_key.fingerprint} matches, login accepted ({seconds:.2f} s)"
    )
    return CheckResult(True, text, seconds, host)


def check_and_record(node_pk: int) -> CheckResult | None:
    """Check a node's connection as it stands now and keep the answer on the node (None: the
    node is gone). Runs on a worker of the ssh queue (collectors.tasks.node_check_record)."""
    from clusters.models import Node, NodeCheck
    from clusters.services import node_check_record

    node = Node.objects.filter(pk=node_pk).first()
    if node is None:
        return None
    spec = node.ssh_target().to_json()
    result = check_connection(spec)
    state = {True: NodeCheck.OK, False: NodeCheck.FAILED, None: NodeCheck.UNKNOWN}[result.ok]
    node_check_record(node_pk=node_pk, spec=spec, state=state, text=result.text)
    return result
