"""The diagnosis as small pure rules over Facts, each returning a finding, and one combiner.

Each rule looks at the facts and either concludes (a `Finding`: its class, suspects, strength,
the lines it rests on and the check that would confirm it) or stays silent (None). Every rule
runs; `analysis.findings.combine` weighs what they found into the verdict. `RULES` lists them
in their precedence: proof of progress first, then ranks that provably left, then the
rendezvous, then disagreements between ranks (B), ranks outside the collective (A), peers
named by NCCL, and configuration (C) last, when everyone came to the same meeting.

Rules of thumb (docs/domain.md): same stack everywhere + a rank absent -> A; different collectives
-> B; same collective + all present -> C; progressing with one rank slow -> straggler; no step
ever completed and ranks in init_process_group -> init.
"""

from __future__ import annotations

from analysis.facts import Facts
from analysis.findings import Finding, combine
from analysis.rules.base import Rule
from analysis.rules.checkpoint import checkpoint_save
from analysis.rules.config import (
    cpu_side,
    nccl_config_differs,
    same_collective,
    undecided,
)
from analysis.rules.departures import departed, init, lost, unreachable
from analysis.rules.failures import (
    failed_first,
    gpu_fault,
    node_failure,
    peers_named,
    process_state,
    ras_named,
    stalled_apart,
)
from analysis.rules.gpu import gpu_cpu_side, gpu_split
from analysis.rules.likeliest import likeliest
from analysis.rules.order import (
    completed_past,
    detail_mismatch,
    different_call_sites,
    fr_all_waiting,
    fr_behind,
    fr_different_collective,
    fr_never_reached,
    lagging,
    logs_different_collective,
    outside_collective,
    peer_named,
    stacks_different_collective,
)
from analysis.rules.progress import moving, no_evidence
from analysis.rules.straggler import straggler
from analysis.rules.stuck import context
from analysis.verdict import Verdict

RULES: tuple[Rule, ...] = (
    no_evidence,
    straggler,
    moving,
    detail_mismatch,
    departed,
    init,
    lost,
    failed_first,
    gpu_fault,
    ras_named,
    process_state,
    node_failure,
    checkpoint_save,
    unreachable,
    fr_different_collective,
    logs_different_collective,
    stalled_apart,
    outside_collective,
    stacks_different_collective,
    different_call_sites,
    fr_never_reached,
    peer_named,
    peers_named,
    fr_behind,
    completed_past,
    lagging,
    nccl_config_differs,
    same_collective,
    fr_all_waiting,
    cpu_side,
    gpu_split,
    gpu_cpu_side,
    likeliest,
)


def findings(facts: Facts, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """What every rule found, in rule order."""
    return [found for rule in rules if (found := rule(facts)) is not None]


def decide(facts: Facts, rules: tuple[Rule, ...] = RULES) -> Verdict:
    return combine(findings(facts, rules), undecided(facts), context(facts))


__all__ = [
    "RULES",
    "Rule",
    "checkpoint_save",
    "completed_past",
    "cpu_side",
    "decide",
    "departed",
    "detail_mismatch",
    "different_call_sites",
    "failed_first",
    "findings",
    "fr_all_waiting",
    "fr_behind",
    "fr_different_collective",
    "fr_never_reached",
    "gpu_cpu_side",
    "gpu_fault",
    "gpu_split",
    "init",
    "lagging",
    "likeliest",
    "logs_different_collective",
    "lost",
    "moving",
    "nccl_config_differs",
    "no_evidence",
    "node_failure",
    "outside_collective",
    "peer_named",
    "peers_named",
    "process_state",
    "ras_named",
    "same_collective",
    "stacks_different_collective",
    "stalled_apart",
    "straggler",
    "undecided",
    "unreachable",
]
