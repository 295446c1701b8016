"""The combiner on its own: findings in, one verdict out (analysis/findings.py)."""

from __future__ import annotations

import pytest

from analysis.findings import Context, Finding, StuckSignal, combine
from analysis.verdict import SECOND_SNAPSHOT, Quote

FALLBACK = Finding("unknown", 0.1, "nothing", rule="fallback")
STUCK = Context(
    stuck=(StuckSignal("timeout", 3, "n0", "Watchdog caught ..."),), proven_stopped=True
)
MOVING = Context(moving=True)
STOPPED = Context(proven_stopped=True)


def found(cls: str, strength: float, rule: str, suspects=(), **kw) -> Finding:
    return Finding(cls, strength, f"{rule} says {cls}", suspects=tuple(suspects), rule=rule, **kw)


def test_it_takes_healthy_when_the_job_moves_and_nothing_says_stuck():
    verdict = combine(
        [found("healthy", 0.85, "moving"), found("A", 0.8, "outside")], FALLBACK, MOVING
    )
    assert verdict.classification == "healthy" and verdict.confidence == 0.85
    assert [a.rule for a in verdict.alternatives] == ["outside"]


def test_one_stuck_signal_outweighs_any_proof_of_motion():
    verdict = combine([found("healthy", 0.85, "moving"), found("A", 0.4, "weak")], FALLBACK, STUCK)
    assert verdict.classification == "A"
    assert "Steps advanced" in verdict.summary
    assert "healthy" in {a.classification for a in verdict.alternatives}


def test_a_stuck_signal_with_only_motion_findings_leaves_the_fallback():
    verdict = combine([found("healthy", 0.85, "moving")], FALLBACK, STUCK)
    assert verdict.rule == "fallback"


def test_a_measured_straggler_is_more_than_healthy():
    findings = [found("healthy", 0.85, "moving"), found("straggler", 0.6, "straggler", [2])]
    verdict = combine(findings, FALLBACK, MOVING)
    assert verdict.classification == "straggler" and verdict.suspects == (2,)


def test_a_strong_finding_beats_a_medium_one_whatever_the_order():
    findings = [found("A", 0.6, "first"), found("B", 0.9, "second")]
    assert combine(findings, FALLBACK, STOPPED).rule == "second"


def test_within_a_band_the_rule_order_decides():
    findings = [found("A", 0.82, "first"), found("A", 0.95, "second", [4])]
    assert combine(findings, FALLBACK, STOPPED).rule == "first"


def test_a_strong_rival_of_another_class_lowers_the_confidence_and_is_named():
    alone = combine([found("B", 0.9, "fr")], FALLBACK, STOPPED)
    rivalled = combine([found("B", 0.9, "fr"), found("A", 0.85, "gone", [3])], FALLBACK, STOPPED)
    assert rivalled.classification == "B"
    assert rivalled.confidence < alone.confidence
    assert rivalled.alternatives[0].classification == "A"
    assert rivalled.alternatives[0].suspects == (3,)


def test_a_weak_finding_of_another_class_is_named_but_takes_nothing_off():
    verdict = combine([found("B", 0.9, "fr"), found("C", 0.4, "env")], FALLBACK, STOPPED)
    assert verdict.confidence == 0.9
    assert [a.classification for a in verdict.alternatives] == ["C"]


def test_findings_blaming_the_same_rank_corroborate():
    line = Quote("nccl_peer", "n1", 5, "recv from rank 3 failed")
    findings = [
        found("A", 0.9, "departed", [3]),
        found("A", 0.75, "peer_named", [3], evidence=(line,)),
    ]
    verdict = combine(findings, FALLBACK, STOPPED)
    assert verdict.rule == "departed" and verdict.confidence > 0.9
    assert line in verdict.evidence


def test_findings_blaming_other_ranks_do_not_corroborate():
    findings = [found("A", 0.9, "departed", [3]), found("A", 0.75, "lagging", [6])]
    assert combine(findings, FALLBACK, STOPPED).confidence == 0.9


@pytest.mark.parametrize("cls", ["A", "B", "C"])
def test_a_stuck_class_on_one_look_is_damped_and_asks_for_a_second(cls):
    verdict = combine([found(cls, 0.9, "rule")], FALLBACK, Context())
    assert verdict.confidence == 0.72
    assert verdict.next_steps[0] == SECOND_SNAPSHOT
    assert "slow or dead?" in verdict.summary


def test_init_is_not_damped_no_step_ever_completed():
    assert combine([found("init", 0.85, "init")], FALLBACK, Context()).confidence == 0.85


def test_the_fallback_speaks_when_no_rule_did():
    assert combine([], FALLBACK, Context()).rule == "fallback"


def test_every_finding_is_kept_with_its_check():
    findings = [found("A", 0.9, "departed", [3], check="read rank 3's dmesg")]
    verdict = combine(findings, FALLBACK, STOPPED)
    assert verdict.check == "read rank 3's dmesg"
    assert [f.rule for f in verdict.findings] == ["departed"]
