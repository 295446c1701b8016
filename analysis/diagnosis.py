"""diagnose(): parse the evidence once, compute the facts, let the rules speak, present it.

The result is a typed `Diagnosis`; `to_json()` is the stored and served form (its fields and
their order are the API's contract, see DIAGNOSIS_SCHEMA_VERSION).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from analysis import report
from analysis.evidence import SnapshotEvidence
from analysis.facts import Facts, build_facts, iso
from analysis.ranks import parse_snapshot
from analysis.rules import decide
from analysis.schedulers.attach import with_scheduler_evidence
from analysis.stacks import compact_ranks
from analysis.verdict import Evidence, Verdict

# 2: typed rules over facts; `unobserved_ranks`, `next_steps`, `rule`, `nccl_config_diffs`.
DIAGNOSIS_SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Diagnosis:
    verdict: Verdict
    facts: Facts
    suspects: tuple[int, ...]
    suspect_nodes: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    stack_groups: list[dict[str, Any]]
    per_rank: list[dict[str, Any]]

    @property
    def classification(self) -> str:
        return self.verdict.classification

    @property
    def summary(self) -> str:
        return self.verdict.summary

    def to_json(self) -> dict[str, Any]:
        f, v = self.facts, self.verdict
        steps = [s.last_step for s in f.ranks.values() if s.last_step is not None]
        expected = set(range(f.world))
        # Seen: observed and not gone (a rank that logged before it died was observed).
        seen = (f.observed & expected if expected else f.observed) - set(f.missing)
        return {
            "schema_version": DIAGNOSIS_SCHEMA_VERSION,
            "classification": v.classification,
            "confidence": v.confidence,
            "summary": v.summary,
            "next_steps": list(v.next_steps),
            "rule": v.rule,
            "check": v.check,
            "alternatives": [a.to_json() for a in v.alternatives],
            "findings": [a.to_json() for a in v.findings],
            "suspect_ranks": list(self.suspects),
            "suspect_ranks_compact": compact_ranks(self.suspects),
            "suspect_nodes": list(self.suspect_nodes),
            "world_size": f.world,
            "ranks_seen": len(seen),
            "ranks_seen_compact": compact_ranks(seen),
            "missing_ranks": list(f.missing),
            "missing_ranks_compact": compact_ranks(f.missing),
            "exited_ranks": list(f.exited),
            "unobserved_ranks": list(f.unobserved),
            "unobserved_ranks_compact": compact_ranks(f.unobserved),
            "last_completed_step": min(steps) if steps else None,
            "max_step": max(steps) if steps else None,
            "progress": f.progress.to_json(),
            "evidence": [e.to_json() for e in self.evidence],
            "per_rank": self.per_rank,
            "stack_groups": self.stack_groups,
            "env_diffs": f.env_diffs,
            "nccl_config_diffs": f.nccl_diffs,
            "shell_init": f.shell,
            "flight_recorder": f.flight_recorder,
            "watchdog": f.watchdog,
            "parse_problems": f.snap.problems,
            "collected_at": iso(f.snap.collected_at),
        }


def diagnose(evidence: SnapshotEvidence, previous: SnapshotEvidence | None = None) -> Diagnosis:
    """Classify one snapshot, compared with an earlier one when given."""
    with _no_cyclic_gc():
        snap = parse_snapshot(with_scheduler_evidence(evidence))
        prev = parse_snapshot(previous, flight_recorder=False) if previous is not None else None
        return diagnose_facts(build_facts(snap, prev))


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Parsing builds millions of small acyclic objects; the cycle collector kept walking them
    (a fifth of the CPU at 4,096 ranks) and finds nothing. Reference counting still frees them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def diagnose_facts(facts: Facts) -> Diagnosis:
    verdict = decide(facts)
    suspects = tuple(sorted(set(verdict.suspects)))
    nodes = set(verdict.suspect_nodes)
    nodes.update(facts.rank_node[r] for r in suspects if r in facts.rank_node)
    nodes.update(n for n, f in facts.nodes.items() if any(x.fatal for x in f.kernel.xids))
    quoted = list(verdict.evidence)
    quoted += report.missing_evidence(facts, quoted)
    quoted += report.node_evidence(facts, nodes)
    groups = report.stack_groups(facts)
    return Diagnosis(
        verdict=verdict,
        facts=facts,
        suspects=suspects,
        suspect_nodes=tuple(sorted(nodes)),
        evidence=tuple(report.ordered_evidence(quoted, set(suspects), nodes)),
        stack_groups=groups,
        per_rank=report.per_rank_rows(facts, set(suspects), groups),
    )
