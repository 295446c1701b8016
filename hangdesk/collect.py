"""`hangdesk collect`: this node's evidence, gathered by the console's own probe, into a bundle.

The script is the one an SSH visit sends (probe.sh, rendered by `frames.render_probe` with the
settings shell-quoted), run here as `timeout -k 2 BUDGET sh -s` in a session of its own; its
frames are read by the same `FrameReader` under the same caps (a frame, the whole output) and a
deadline, and the process group is stopped at the deadline. So a node with no SSH access gives
the console exactly what a visit would have.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import time
from argparse import Namespace
from dataclasses import dataclass
from datetime import UTC, datetime

from analysis.evidence import EvidenceStatus, NodeEvidence, SnapshotEvidence, stopped_short

from .bundles import write_bundle
from .evidence_kinds import as_text
from .frames import FrameReader, evidence_from_frames, mark_unfinished, render_probe
from .plan import CollectionPlan, KiB

EXIT_COMPLETE = 0
EXIT_PARTIAL = 1
EXIT_NOTHING = 2
STDERR_CAP = 8 * KiB
# The probe stops itself this long before the deadline (`timeout`), to ship what it has.
MARGIN_S = 3.0


@dataclass
class LocalRun:
    reader: FrameReader
    exit_status: int | None
    stderr: bytes
    seconds: float
    out_of_time: bool
    started_at: datetime


def run_probe_here(plan: CollectionPlan) -> LocalRun:
    """The probe on this machine, bounded like an SSH visit: the byte caps, the per-command
    timeout inside the script, and the whole run within `plan.total_timeout_s`."""
    plan.validate()
    nonce = secrets.token_hex(8)
    reader = FrameReader(
        nonce,
        frame_cap=max(plan.tail_bytes, plan.artifact_cap_bytes) + 64 * KiB,
        total_cap=plan.max_total_bytes,
    )
    started, started_at = time.monotonic(), datetime.now(UTC)
    deadline = started + plan.total_timeout_s
    budget = max(1, math.floor(plan.total_timeout_s - min(MARGIN_S, plan.total_timeout_s * 0.2)))
    process = subprocess.Popen(
        ["timeout", "-k", "2", str(budget), "sh", "-s"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: stopped as one at the deadline
    )
    stderr = bytearray()
    out_of_time = False
    try:
        assert process.stdin is not None
        process.stdin.write(render_probe(plan, nonce=nonce, skip_pid=os.getpid()))
        process.stdin.close()
        out_of_time = _read(process, reader, stderr, deadline)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # our own child's group, by its id
        process.wait()
    seconds = time.monotonic() - started
    return LocalRun(reader, process.returncode, bytes(stderr), seconds, out_of_time, started_at)


def _read(process: subprocess.Popen, reader: FrameReader, stderr: bytearray, deadline: float):
    """Both pipes until the probe closes them, the deadline, or the byte cap; True when the
    deadline stopped it."""
    streams = selectors.DefaultSelector()
    streams.register(process.stdout, selectors.EVENT_READ, "out")
    streams.register(process.stderr, selectors.EVENT_READ, "err")
    with streams:
        while streams.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            for key, _ in streams.select(timeout=min(left, 0.25)):
                data = os.read(key.fileobj.fileno(), 256 * KiB)
                if not data:
                    streams.unregister(key.fileobj)
                elif key.data == "err":
                    stderr += data[: max(0, STDERR_CAP - len(stderr))]
                else:
                    reader.feed(data)
                    if reader.over_cap or reader.error:
                        return False
    return False


def evidence_of(run: LocalRun, node: str, plan: CollectionPlan) -> NodeEvidence:
    evidence = evidence_from_frames(node, run.reader)
    evidence.collected_at = run.started_at  # as a visit: when it began
    mark_unfinished(evidence, run.reader)
    if run.stderr.strip():
        evidence.system["probe stderr"] = as_text(run.stderr)
    evidence.system["collection"] = (
        f"hangdesk collect: {run.seconds:.2f}s, {run.reader.total} bytes, "
        f"exit status {run.exit_status}"
    )
    evidence.status = _status(run, plan)
    return evidence


def _status(run: LocalRun, plan: CollectionPlan) -> EvidenceStatus:
    reader = run.reader
    if reader.ended:
        return EvidenceStatus()
    if run.out_of_time:
        return stopped_short(f"time budget of {plan.total_timeout_s:g}s used up")
    if reader.over_cap:
        return stopped_short(f"output cut at {plan.max_total_bytes} bytes")
    if reader.error:
        return stopped_short(reader.error)
    if run.exit_status in (124, 137):
        return stopped_short("the probe used up its time on the node")
    detail = as_text(run.stderr).strip()[-500:]
    return stopped_short(f"probe exited with status {run.exit_status} before finishing: {detail}")


def plan_of(args: Namespace) -> CollectionPlan:
    plan = CollectionPlan()
    if args.pattern:
        plan.process_pattern = args.pattern
    if args.logs:
        plan.log_globs = list(args.logs)
    if args.flight_recorder:
        plan.flight_recorder_globs = list(args.flight_recorder)
    if args.pyspy:
        plan.pyspy_command = args.pyspy
    if args.timeout:
        plan.total_timeout_s = args.timeout
        plan.command_timeout_s = min(plan.command_timeout_s, args.timeout)
    return plan


def collect_command(args: Namespace) -> int:
    """Gather, write the bundle (a file, or standard output when it is not a terminal), say
    what is in it on standard error."""
    if args.out == "-" and sys.stdout.isatty():
        print(
            "hangdesk collect: the bundle is binary: give --out FILE, or pipe it "
            "(hangdesk collect | hangdesk upload - --incident ID)",
            file=sys.stderr,
        )
        return EXIT_NOTHING
    try:
        plan = plan_of(args)
        plan.validate()
    except ValueError as exc:
        print(f"hangdesk collect: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    node = args.node or socket.gethostname()
    run = run_probe_here(plan)
    if not run.reader.started:
        detail = as_text(run.stderr).strip()[-500:] or "no output"
        print(f"hangdesk collect: the probe gave nothing: {detail}", file=sys.stderr)
        return EXIT_NOTHING
    evidence = evidence_of(run, node, plan)
    snapshot = SnapshotEvidence(
        nodes=[evidence],
        expected_world_size=args.world_size,
        collected_at=evidence.collected_at,
    )
    data = write_bundle(snapshot, {"collector": "hangdesk collect"})
    where = _write(args.out, data)
    print(f"hangdesk collect: {node}: {_contents(evidence)} -> {where}", file=sys.stderr)
    return EXIT_COMPLETE if evidence.status.complete else EXIT_PARTIAL


def _write(out: str, data: bytes) -> str:
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return f"standard output ({len(data):,} bytes)"
    with open(out, "wb") as handle:
        handle.write(data)
    return f"{out} ({len(data):,} bytes)"


def _contents(evidence: NodeEvidence) -> str:
    ranks = sum(1 for env in evidence.environ.values() if _has_rank(env))
    parts = [
        f"{len(evidence.environ)} processes ({ranks} ranks)",
        f"{len(evidence.pyspy)} stacks",
        f"{len(evidence.logs)} logs",
        f"{len(evidence.flight_recorder)} flight-recorder dumps",
    ]
    if evidence.status.note:
        parts.append(f"stopped short: {evidence.status.note}")
    return ", ".join(parts)


def _has_rank(environ: bytes) -> bool:
    return environ.startswith(b"RANK=") or b"\0RANK=" in environ
