"""diagnose(): parse the evidence once, compute the facts, let the rules speak, present it.

The result is a typed `Diagnosis`. `to_json()` is the stored and served form (its fields and
their order are the API's contract, `collectors/diagnosis_serializers.py`); `from_json()`
reads any stored version back (analysis/schema.py upgrades the older ones), so every reader
works on the same typed fields whatever version stored them.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from analysis import gpushape, report
from analysis.evidence import SnapshotEvidence
from analysis.facts import Facts, Progress, build_facts
from analysis.fr_records import FlightRecorderSummary
from analysis.gpushape import GpuRow
from analysis.nodemap import NodeParse
from analysis.records import (
    EnvDiff,
    NcclConfigDiff,
    ParseProblem,
    RankRow,
    ShellInitLine,
    StackGroup,
    WatchdogSummary,
    as_ints,
    as_opt_int,
    as_str,
    as_strs,
    iso,
    read_when,
    records,
    rows_json,
)
from analysis.rules import decide
from analysis.schema import DIAGNOSIS_SCHEMA_VERSION, upgrade
from analysis.snapshot_parse import (
    Abandoned,
    ParsedSnapshot,
    Reparse,
    merge_parses,
    parse_snapshot,
)
from analysis.stacks import compact_ranks
from analysis.verdict import Alternative, Quote

__all__ = ["DIAGNOSIS_SCHEMA_VERSION", "Diagnosis", "diagnose", "diagnose_facts"]


@dataclass(frozen=True)
class Diagnosis:
    """One snapshot's verdict, the evidence behind it, and what the pages show beside it."""

    classification: str
    confidence: float
    summary: str
    next_steps: tuple[str, ...] = ()
    rule: str = ""  # the rule whose finding the verdict took (analysis/rules/)
    check: str = ""  # the one check that would confirm the verdict
    alternatives: tuple[Alternative, ...] = ()  # other classes the evidence also supports
    findings: tuple[Alternative, ...] = ()  # what every rule found, as it spoke
    suspect_ranks: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()
    world_size: int = 0
    ranks_seen: int = 0  # observed and not gone
    ranks_seen_compact: str = ""
    missing_ranks: tuple[int, ...] = ()  # gone on positive evidence
    exited_ranks: tuple[int, ...] = ()  # the missing with an exit code or a zombie
    unobserved_ranks: tuple[int, ...] = ()  # the evidence says nothing about them
    last_completed_step: int | None = None  # completed by every rank
    max_step: int | None = None  # reached by any rank
    progress: Progress = field(default_factory=lambda: Progress("none", None))
    evidence: tuple[Quote, ...] = ()
    per_rank: tuple[RankRow, ...] = ()
    stack_groups: tuple[StackGroup, ...] = ()
    env_diffs: tuple[EnvDiff, ...] = ()
    nccl_config_diffs: tuple[NcclConfigDiff, ...] = ()
    shell_init: tuple[ShellInitLine, ...] = ()
    flight_recorder: FlightRecorderSummary | None = None
    watchdog: WatchdogSummary | None = None
    parse_problems: tuple[ParseProblem, ...] = ()
    collected_at: datetime | None = None
    # Each rank's GPU over time (analysis/gpushape.py): the page's utilisation strip.
    gpu_shape: tuple[GpuRow, ...] = ()
    # When the job began (analysis/jobtime.py): lines stamped before it are an earlier run's.
    job_started_at: datetime | None = None

    @property
    def suspect_ranks_compact(self) -> str:
        return compact_ranks(self.suspect_ranks)

    @property
    def missing_ranks_compact(self) -> str:
        return compact_ranks(self.missing_ranks)

    @property
    def exited_ranks_compact(self) -> str:
        return compact_ranks(self.exited_ranks)

    @property
    def unobserved_ranks_compact(self) -> str:
        return compact_ranks(self.unobserved_ranks)

    @property
    def real_env_diffs(self) -> tuple[EnvDiff, ...]:
        """The differences that matter: not the variables that differ per rank by design."""
        return tuple(d for d in self.env_diffs if not d.expected_per_rank)

    @classmethod
    def empty(cls) -> Diagnosis:
        """No verdict: what a page reads where a snapshot has no diagnosis (yet)."""
        return cls(classification="", confidence=0.0, summary="")

    def rank_row(self, rank: int | None) -> RankRow | None:
        if rank is None:
            return None
        return next((row for row in self.per_rank if row.rank == rank), None)

    def to_json(self) -> dict[str, Any]:
        fr, watchdog = self.flight_recorder, self.watchdog
        return {
            "schema_version": DIAGNOSIS_SCHEMA_VERSION,
            "classification": self.classification,
            "confidence": self.confidence,
            "summary": self.summary,
            "next_steps": list(self.next_steps),
            "rule": self.rule,
            "check": self.check,
            "alternatives": [a.to_json() for a in self.alternatives],
            "findings": [f.to_json() for f in self.findings],
            "suspect_ranks": list(self.suspect_ranks),
            "suspect_ranks_compact": self.suspect_ranks_compact,
            "suspect_nodes": list(self.suspect_nodes),
            "world_size": self.world_size,
            "ranks_seen": self.ranks_seen,
            "ranks_seen_compact": self.ranks_seen_compact,
            "missing_ranks": list(self.missing_ranks),
            "missing_ranks_compact": self.missing_ranks_compact,
            "exited_ranks": list(self.exited_ranks),
            "unobserved_ranks": list(self.unobserved_ranks),
            "unobserved_ranks_compact": self.unobserved_ranks_compact,
            "last_completed_step": self.last_completed_step,
            "max_step": self.max_step,
            "progress": self.progress.to_json(),
            "evidence": [e.to_json() for e in self.evidence],
            "per_rank": rows_json(self.per_rank),
            "stack_groups": [g.to_json() for g in self.stack_groups],
            "env_diffs": [d.to_json() for d in self.env_diffs],
            "nccl_config_diffs": [d.to_json() for d in self.nccl_config_diffs],
            "shell_init": [s.to_json() for s in self.shell_init],
            "flight_recorder": fr.to_json() if fr else None,
            "watchdog": watchdog.to_json() if watchdog else None,
            "parse_problems": [p.to_json() for p in self.parse_problems],
            "collected_at": iso(self.collected_at),
            "job_started_at": iso(self.job_started_at),
            "gpu_shape": [g.to_json() for g in self.gpu_shape],
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Diagnosis:
        """A stored diagnosis of any schema version, upgraded to this one."""
        data = upgrade(stored)
        get = data.get
        confidence = get("confidence")
        progress, fr, watchdog = get("progress"), get("flight_recorder"), get("watchdog")
        return cls(
            classification=as_str(get("classification"), "unknown"),
            confidence=float(confidence) if isinstance(confidence, int | float) else 0.0,
            summary=as_str(get("summary")),
            next_steps=as_strs(get("next_steps")),
            rule=as_str(get("rule")),
            check=as_str(get("check")),
            alternatives=records(Alternative, get("alternatives")),
            findings=records(Alternative, get("findings")),
            suspect_ranks=as_ints(get("suspect_ranks")),
            suspect_nodes=as_strs(get("suspect_nodes")),
            world_size=as_opt_int(get("world_size")) or 0,
            ranks_seen=as_opt_int(get("ranks_seen")) or 0,
            ranks_seen_compact=as_str(get("ranks_seen_compact")),
            missing_ranks=as_ints(get("missing_ranks")),
            exited_ranks=as_ints(get("exited_ranks")),
            unobserved_ranks=as_ints(get("unobserved_ranks")),
            last_completed_step=as_opt_int(get("last_completed_step")),
            max_step=as_opt_int(get("max_step")),
            progress=Progress.from_json(progress if isinstance(progress, Mapping) else {}),
            evidence=records(Quote, get("evidence")),
            per_rank=records(RankRow, get("per_rank")),
            stack_groups=records(StackGroup, get("stack_groups")),
            env_diffs=records(EnvDiff, get("env_diffs")),
            nccl_config_diffs=records(NcclConfigDiff, get("nccl_config_diffs")),
            shell_init=records(ShellInitLine, get("shell_init")),
            flight_recorder=FlightRecorderSummary.from_json(fr)
            if isinstance(fr, Mapping)
            else None,
            watchdog=WatchdogSummary.from_json(watchdog) if isinstance(watchdog, Mapping) else None,
            parse_problems=records(ParseProblem, get("parse_problems")),
            collected_at=read_when(get("collected_at")),
            job_started_at=read_when(get("job_started_at")),
            gpu_shape=records(GpuRow, get("gpu_shape")),  # absent before: none
        )


def diagnose(evidence: SnapshotEvidence, previous: SnapshotEvidence | None = None) -> Diagnosis:
    """Classify one snapshot, compared with an earlier one when given."""
    with _no_cyclic_gc():
        snap = parse_snapshot(evidence, scheduler_lines=True)
        prev = parse_snapshot(previous, flight_recorder=False) if previous is not None else None
        return diagnose_facts(build_facts(snap, prev))


def diagnose_parses(
    head: SnapshotEvidence,
    parses: list[NodeParse],
    reparse: Reparse,
    previous: SnapshotEvidence | ParsedSnapshot | None = None,
    keep_going: Callable[[], bool] | None = None,
    kept: list | None = None,
) -> Diagnosis:
    """The reduce: `diagnose` from each node's parse (`analysis.nodemap.map_node`, made with
    the scheduler's lines), as the workers that collected the nodes stored them. `head`: the
    snapshot without its nodes (world size, time, scheduler); `reparse(index, rank_pids)`
    parses a node again from its evidence when what its parse assumed no longer holds.
    `previous`: an earlier snapshot's evidence, or it parsed already as `diagnose` parses it
    (`parse_snapshot(previous, flight_recorder=False)`: from its own stored parses).
    `keep_going`: asked during the merge and between its steps; False raises Abandoned.
    `kept`: the merge and the facts are added to it, for the caller to free once its verdict
    is stored (freeing them here came before the store: 0.05 s at 32,000 ranks)."""
    with _no_cyclic_gc():
        snap = merge_parses(
            parses,
            expected_world_size=head.expected_world_size,
            collected_at=head.collected_at,
            scheduler=head.scheduler,
            scheduler_lines=True,
            flight_recorder=True,
            reparse=reparse,
            keep_going=keep_going,
        )
        prev = previous
        if isinstance(previous, SnapshotEvidence):
            prev = parse_snapshot(previous, flight_recorder=False)
        _ask(keep_going, "before the facts")
        facts = build_facts(snap, prev)
        if kept is not None:
            kept += (snap, prev, facts)
        _ask(keep_going, "before the rules")
        return diagnose_facts(facts)


def _ask(keep_going: Callable[[], bool] | None, where: str) -> None:
    if keep_going is not None and not keep_going():
        raise Abandoned(where)


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """For callers that build the engine's records in bulk (stored parses read back)."""
    with _no_cyclic_gc():
        yield


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
            # What was built meanwhile goes to the oldest generation at once (freeze, then
            # unfreeze: two list splices): left in the youngest, the first collection after
            # enable() walked every one of them (0.9 s at 32,000 ranks) to find no cycle.
            gc.freeze()
            gc.unfreeze()
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
    expected = set(range(facts.world))
    # Seen: observed and not gone (a rank that logged before it died was observed).
    seen = (facts.observed & expected if expected else facts.observed) - set(facts.missing)
    return Diagnosis(
        classification=verdict.classification,
        confidence=verdict.confidence,
        summary=verdict.summary,
        next_steps=tuple(verdict.next_steps),
        rule=verdict.rule,
        check=verdict.check,
        alternatives=verdict.alternatives,
        findings=verdict.findings,
        suspect_ranks=suspects,
        suspect_nodes=tuple(sorted(nodes)),
        world_size=facts.world,
        ranks_seen=len(seen),
        ranks_seen_compact=compact_ranks(seen),
        missing_ranks=tuple(facts.missing),
        exited_ranks=tuple(facts.exited),
        unobserved_ranks=tuple(facts.unobserved),
        last_completed_step=facts.step_range[0] if facts.step_range else None,
        max_step=facts.step_range[1] if facts.step_range else None,
        progress=facts.progress,
        evidence=tuple(report.ordered_evidence(quoted, set(suspects), nodes)),
        per_rank=tuple(report.per_rank_rows(facts, set(suspects), groups)),
        stack_groups=tuple(groups),
        env_diffs=records(EnvDiff, facts.env_diffs),
        nccl_config_diffs=records(NcclConfigDiff, facts.nccl_diffs),
        shell_init=records(ShellInitLine, facts.shell),
        flight_recorder=FlightRecorderSummary.from_json(facts.flight_recorder)
        if facts.flight_recorder
        else None,
        watchdog=WatchdogSummary.from_json(facts.watchdog) if facts.watchdog else None,
        parse_problems=records(ParseProblem, facts.snap.problems),
        collected_at=facts.snap.collected_at,
        job_started_at=facts.job_started,
        gpu_shape=tuple(gpushape.rows(facts.gpu)),
    )
