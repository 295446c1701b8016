"""Nodes that misbehave after login (sshd runs hostile_node.sh instead of the probe)."""

from __future__ import annotations

import time

from analysis.evidence import stopped_short
from collectors.outcomes import FailureKind
from collectors.visits import ssh_visit


def test_it_abandons_a_node_that_takes_the_command_and_goes_silent(sshd, ranks):
    started = time.monotonic()
    visit = ssh_visit(sshd.hostile_target("silent"), ranks.plan(total_timeout_s=2))
    assert time.monotonic() - started < 3
    text = "unreachable: no probe output before the time budget of 2s used up"
    assert visit.evidence.status.note == text
    assert (visit.failure.kind, visit.failure.text) == (FailureKind.UNREACHABLE, text)
    assert visit.failure.transient


def test_it_keeps_what_arrived_before_a_node_went_silent(sshd, ranks):
    started = time.monotonic()
    evidence = ssh_visit(
        sshd.hostile_target("frames-then-silent"), ranks.plan(total_timeout_s=2)
    ).evidence
    assert time.monotonic() - started < 3
    assert evidence.status == stopped_short("time budget of 2s used up")
    assert evidence.hostname == "hostile"
    assert evidence.pyspy_errors == {4242: "not collected: the probe stopped before py-spy ended"}


def test_it_cuts_off_a_node_that_floods_noise(sshd, ranks):
    started = time.monotonic()
    evidence = ssh_visit(
        sshd.hostile_target("flood"), ranks.plan(max_total_bytes=1_000_000)
    ).evidence
    assert time.monotonic() - started < 5
    assert evidence.status.note.startswith(
        "probe failed: exit status None: not a probe, just noise"
    )
    assert evidence.system["output before probe"].startswith("not a probe, just noise\n")
    assert len(evidence.system["output before probe"]) <= 16 * 1024
