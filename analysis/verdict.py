"""The diagnosis: classify a hang (A / B / C / straggler / init / healthy / unknown), name the
suspects and quote the evidence.

Rules of thumb (docs: DOMAIN.md): same stack everywhere + a rank absent -> A; different
collectives -> B; same collective + all present -> C; still progressing with one rank slow ->
straggler; no step ever completed and ranks in init_process_group -> init.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from functools import cached_property

from analysis.alignment import align_flight_recorder, read_watchdog
from analysis.envdiff import env_diffs, minority_ranks, shell_init_findings
from analysis.evidence import SnapshotEvidence
from analysis.ranks import (
    TERMINATED_BY_LAUNCHER,
    ParsedSnapshot,
    RankState,
    line_rank,
    parse_snapshot,
)
from analysis.stacks import base_name, compact_ranks

CLASSES = ("A", "B", "C", "straggler", "init", "healthy", "unknown")
RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT")
# Clock skew between a node's kernel log and ps, and dmesg -T's drift after suspend.
JOB_START_SLACK = timedelta(minutes=2)
_EVIDENCE_CAP = 40
_NODE_CAP = 24
_STACK_SAMPLE = 15

EXIT_MEANING = {
    137: "SIGKILL, often the OOM killer",
    -9: "SIGKILL, often the OOM killer",
    139: "SIGSEGV, segfault",
    -11: "SIGSEGV, segfault",
    134: "SIGABRT, abort",
    -6: "SIGABRT, abort",
    -15: "SIGTERM, stopped by the launcher",
    143: "SIGTERM, stopped by the launcher",
    -7: "SIGBUS, often /dev/shm too small",
    135: "SIGBUS, often /dev/shm too small",
    1: "error exit",
}


def diagnose(evidence: SnapshotEvidence, previous: SnapshotEvidence | None = None) -> dict:
    """Classify one snapshot (compared with an earlier one when given) into a JSON-ready dict."""
    snap = parse_snapshot(evidence)
    prev = parse_snapshot(previous) if previous is not None else None
    return _Diagnosis(snap, prev).build()


class _Diagnosis:
    def __init__(self, snap: ParsedSnapshot, prev: ParsedSnapshot | None) -> None:
        self.snap = snap
        self.prev = prev
        self.world = snap.world_size
        self.ranks = snap.ranks
        self.rank_node = {r: s.node for r, s in snap.ranks.items()}
        self.evidence: list[dict] = []
        self._evidence_keys: set[tuple] = set()
        self._local_maps: dict[str, dict[int, int]] = {}
        self.suspects: list[int] = []
        self.suspect_nodes: set[str] = set()

    # ---------------------------------------------------------------- facts
    def _seen(self) -> set[int]:
        seen = set()
        for rank, state in self.ranks.items():
            node = self.snap.nodes.get(state.node)
            process_evidence = node.has_process_evidence if node else False
            if state.process_seen:
                seen.add(rank)
            elif not process_evidence and state.exit_code is None and state.last_step is not None:
                seen.add(rank)  # a log-only node: the log is all we have of this rank
        return seen

    def _progress(self) -> dict:
        """Is the job moving? Two snapshots when we have them, else the age of the last step."""
        now_steps = {r: s.last_step for r, s in self.ranks.items() if s.last_step is not None}
        if self.prev is not None:
            before = {r: s.last_step for r, s in self.prev.ranks.items() if s.last_step is not None}
            common = sorted(set(now_steps) & set(before))
            advanced = [r for r in common if now_steps[r] > before[r]]
            moved = [
                r
                for r, s in self.ranks.items()
                if r in self.prev.ranks
                and s.stack_signature
                and self.prev.ranks[r].stack_signature
                and s.stack_signature != self.prev.ranks[r].stack_signature
            ]
            if common:
                return {
                    "method": "two_snapshots",
                    # Stacks that moved without a finished step: alive but slow (a long step,
                    # a checkpoint), or dead? Undecided rather than "stuck".
                    "progressing": True if advanced else (None if moved else False),
                    "advanced_ranks": compact_ranks(advanced),
                    "step_before": max(before[r] for r in common),
                    "step_after": max(now_steps[r] for r in common),
                    "stacks_changed": compact_ranks(moved),
                }
            return {
                "method": "two_snapshots",
                "progressing": None if moved else False,
                "advanced_ranks": "",
                "stacks_changed": compact_ranks(moved),
            }
        times = [s.last_step_at for s in self.ranks.values() if s.last_step_at is not None]
        if times and self.snap.collected_at is not None:
            latest = max(times)
            age = (self.snap.collected_at - latest).total_seconds()
            intervals = sorted(s.step_time for s in self.ranks.values() if s.step_time)
            interval = intervals[len(intervals) // 2] if intervals else None
            threshold = max(10 * interval, 2.0) if interval else 60.0
            return {
                "method": "last_step_age",
                "progressing": age <= threshold,
                "age_s": round(age, 1),
                "threshold_s": round(threshold, 1),
            }
        return {"method": "none", "progressing": None}

    # ---------------------------------------------------------------- build
    def build(self) -> dict:
        seen = self._seen()
        expected = set(range(self.world))
        missing = sorted(expected - seen)
        exited = sorted(
            r
            for r, s in self.ranks.items()
            if not s.process_seen and (s.exit_code is not None or s.state == "Z")
        )
        missing_only = [r for r in missing if r not in exited]
        progress = self._progress()
        fr = align_flight_recorder(self.snap.dumps)
        watchdog = read_watchdog(self.snap.watchdog)
        diffs = env_diffs(self.snap.env, self.rank_node)
        shell = shell_init_findings({n: f.shell_init for n, f in self.snap.nodes.items()})
        groups = self._stack_groups(missing_only, exited, seen)
        classification, confidence, summary = self._classify(
            missing, exited, progress, fr, watchdog, diffs, shell, groups
        )
        suspects = sorted(set(self.suspects))
        for rank in suspects:
            if rank in self.rank_node:
                self.suspect_nodes.add(self.rank_node[rank])
        self._node_evidence(shell)
        steps = [s.last_step for r, s in self.ranks.items() if s.last_step is not None]
        return {
            "classification": classification,
            "confidence": round(confidence, 2),
            "summary": summary,
            "world_size": self.world,
            "ranks_seen": len(seen & expected) if expected else len(seen),
            "ranks_seen_compact": compact_ranks(seen),
            "missing_ranks": missing,
            "missing_ranks_compact": compact_ranks(missing),
            "exited_ranks": exited,
            "suspect_ranks": suspects,
            "suspect_ranks_compact": compact_ranks(suspects),
            "suspect_nodes": sorted(self.suspect_nodes),
            "last_completed_step": min(steps) if steps else None,
            "max_step": max(steps) if steps else None,
            "progress": progress,
            "per_rank": self._per_rank(missing_only, exited, seen, set(suspects), groups),
            "stack_groups": groups,
            "env_diffs": diffs,
            "shell_init": shell,
            "flight_recorder": fr,
            "watchdog": watchdog,
            "evidence": self._ordered_evidence(set(suspects)),
            "parse_problems": self.snap.problems,
            "collected_at": _iso(self.snap.collected_at),
        }

    # ---------------------------------------------------------------- stacks
    def _stack_groups(self, missing: list[int], exited: list[int], seen: set[int]) -> list[dict]:
        by_signature: dict[str, list[RankState]] = defaultdict(list)
        no_stack: list[int] = []
        for rank in sorted(self.ranks):
            state = self.ranks[rank]
            if state.stack_signature:
                by_signature[state.stack_signature].append(state)
            elif state.process_seen:
                no_stack.append(rank)
        groups = []
        for signature, members in by_signature.items():
            head = members[0]
            name, _, location = head.innermost_frame.partition(" (")
            groups.append(
                self._group(
                    signature,
                    name,
                    location.rstrip(")"),
                    head.frame_kind,
                    [m.rank for m in members],
                    head.stack[:_STACK_SAMPLE],
                )
            )
        if missing:
            groups.append(self._group("", "(absent)", "", "missing", missing, []))
        if exited:
            groups.append(self._group("", "(exited)", "", "exited", exited, []))
        if no_stack:
            groups.append(self._group("", "(no stack)", "", "no_stack", no_stack, []))
        log_only = sorted(r for r in seen if not self.ranks[r].process_seen)
        if log_only:
            groups.append(self._group("", "(log only)", "", "log_only", log_only, []))
        groups.sort(key=lambda g: (-g["rank_count"], g["frame"], g["signature"]))
        for index, group in enumerate(groups):
            group["index"] = index
        return groups

    def _group(self, signature, frame, location, kind, ranks, stack) -> dict:
        nodes = sorted({self.rank_node.get(r, "?") for r in ranks})
        return {
            "signature": signature,
            "frame": frame,
            "location": location,
            "kind": kind,
            "ranks": compact_ranks(ranks),
            "rank_list": ranks,
            "rank_count": len(ranks),
            "nodes": nodes[:_NODE_CAP],
            "node_count": len(nodes),
            "stack": stack,
        }

    # ---------------------------------------------------------------- classify
    def _classify(self, missing, exited, progress, fr, watchdog, diffs, shell, groups):
        with_stack = [s for s in self.ranks.values() if s.stack_signature]
        kinds = Counter(s.frame_kind for s in with_stack)
        in_collective = [s for s in with_stack if s.frame_kind == "collective"]
        outside = sorted(s.rank for s in with_stack if s.frame_kind == "outside")
        ops = Counter(base_name(s.frame_name) for s in in_collective)
        signatures = Counter(s.stack_signature for s in in_collective)
        any_step = any(s.last_step is not None for s in self.ranks.values())
        progressing = progress.get("progressing")
        problems = []
        if not self.ranks and not self.snap.logs:
            return "unknown", 0.0, "No rank, stack or log was found in this snapshot."

        if progressing:
            return self._moving(progress, outside, in_collective, diffs)

        stuck_hint = "" if progressing is False else " (one snapshot without timing: slow or dead?)"
        damp = 1.0 if progressing is False else 0.8

        # init: nobody ever finished a step and ranks sit in the rendezvous.
        if kinds.get("init", 0) > len(with_stack) / 2 or (
            not any_step and not in_collective and (self.ranks or missing)
        ):
            # No step ever completed: "slow or dead?" does not arise, nothing to damp.
            return self._init(missing, exited, kinds, stuck_hint, 1.0, diffs)

        first_fr = (fr or {}).get("first_mismatch") or None
        lost = sorted(set(missing) | set(exited))
        if lost:
            return self._a_lost(lost, exited, in_collective, ops, first_fr, stuck_hint, damp)
        if first_fr and first_fr["kind"] == "different_collective":
            return self._b_flight_recorder(first_fr, ops, damp)
        if outside and in_collective:
            return self._a_outside(outside, in_collective, ops, first_fr, stuck_hint, damp)
        mismatch_lines = [f for _, log in self.snap.logs for f in log.mismatches]
        if len(ops) > 1 or mismatch_lines:
            return self._b_stacks(in_collective, ops, mismatch_lines, damp)
        if len(signatures) > 1:
            return self._b_call_sites(in_collective, signatures, damp)
        if first_fr and first_fr["kind"] == "missing_ranks":
            ranks = first_fr["missing_rank_list"]
            self._suspect(ranks)
            self._fr_evidence(first_fr)
            return (
                "A",
                0.7 * damp,
                f"{_ranks(ranks).capitalize()} never reached collective #{first_fr['seq']} "
                f"({_op_of(first_fr)}) that the others entered (flight recorder).{stuck_hint}",
            )
        lagging = self._lagging(watchdog)
        if lagging:
            self._suspect(lagging)
            return (
                "A",
                0.6 * damp,
                f"{_ranks(lagging).capitalize()} fell behind: "
                "their last completed collective or step is older than the others'; "
                f"read their log tails.{stuck_hint}",
            )
        if in_collective and len(ops) == 1 and not outside:
            return self._c(in_collective, ops, diffs, shell, progress, damp)
        if outside and not in_collective:
            self._suspect(outside)
            for rank in outside[:5]:
                self._stack_evidence(rank)
            return (
                "A",
                0.4 * damp,
                f"No rank is inside a collective: {_ranks(outside)} are stuck on the "
                f"CPU side ({self.ranks[outside[0]].innermost_frame}). Look at data loading, "
                f"I/O and locks.{stuck_hint}",
            )
        if watchdog and watchdog.get("stuck_collective") and not self.snap.has_process_evidence:
            stuck = watchdog["stuck_collective"]
            for node, rank, fact in self.snap.watchdog[:5]:
                self._add("watchdog", node, rank, fact.line)
            return (
                "C",
                0.35,
                f"Logs only: the watchdog reports collective #{stuck['seq']} "
                f"({stuck['op'] or 'op unknown'}) timed out and no rank lags in the logs. "
                "Collect stacks to tell B from C.",
            )
        problems.append("no stack, flight-recorder or watchdog evidence decides")
        return "unknown", 0.2, "Not enough evidence to classify: " + "; ".join(problems) + "."

    def _moving(self, progress, outside, in_collective, diffs):
        stragglers = outside if in_collective and outside else []
        if self.prev is not None and stragglers:
            # A straggler is slow every time we look; one snapshot may just catch a rank busy.
            before_outside = {r for r, s in self.prev.ranks.items() if s.frame_kind == "outside"}
            stragglers = [r for r in stragglers if r in before_outside]
        cap = max(1, self.world // 8)
        step_desc = _step_desc(progress)
        if not stragglers:
            stragglers = self._slow_by_step_time()
        if stragglers and len(stragglers) <= cap:
            self._suspect(stragglers)
            for rank in stragglers[:5]:
                self._stack_evidence(rank)
            waiting = sorted(s.rank for s in in_collective)
            self._add_progress(progress)
            frame = self.ranks[stragglers[0]].innermost_frame or "a slow step"
            nodes = sorted({self.rank_node[r] for r in stragglers})
            return (
                "straggler",
                0.75 if progress["method"] == "two_snapshots" else 0.55,
                f"The job still progresses ({step_desc}) but {_ranks(stragglers)} "
                f"{'is' if len(stragglers) == 1 else 'are'} slow: busy in {frame} while "
                f"{_ranks(waiting)} wait in "
                f"collectives. Look at {', '.join(nodes[:5])}: data, CPU, disk, throttling.",
            )
        self._add_progress(progress)
        note = ""
        real_diffs = [d for d in diffs if not d["expected_per_rank"]]
        if real_diffs:
            note = (
                f" Environment differs across ranks ({real_diffs[0]['name']}): "
                "fix it before it bites."
            )
            for diff in real_diffs[:3]:
                self._add("env_diff", None, None, _diff_text(diff))
        return (
            "healthy",
            0.85 if progress["method"] == "two_snapshots" else 0.6,
            f"Training progresses ({step_desc}); no rank is stuck.{note}",
        )

    def _slow_by_step_time(self) -> list[int]:
        times = sorted((s.step_time, r) for r, s in self.ranks.items() if s.step_time)
        if len(times) < 3:
            return []
        median = times[len(times) // 2][0]
        return sorted(r for t, r in times if median > 0 and t > 1.5 * median)

    def _init(self, missing, exited, kinds, stuck_hint, damp, diffs):
        waiting = sorted(r for r, s in self.ranks.items() if s.frame_kind == "init")
        lost = sorted(set(missing) | set(exited))
        self._suspect(lost)
        # Everyone came but to different places: the ranks pointed at another rendezvous.
        for diff in diffs:
            if diff["name"] in RENDEZVOUS_VARIABLES and not lost:
                odd = sorted(minority_ranks(diff, self.snap.env, self.rank_node))
                self._suspect(odd)
                self._add("env_diff", None, odd[0] if len(odd) == 1 else None, _diff_text(diff))
        for rank in waiting[:2]:
            self._stack_evidence(rank)
        for rank in lost[:10]:
            self._lost_evidence(rank)
        master = {self.snap.env[r].get("MASTER_ADDR") for r in self.snap.env} - {None}
        where = f" (MASTER_ADDR {', '.join(sorted(master))})" if master else ""
        if lost:
            who = f"{_ranks(lost)} never joined"
        elif self.suspects:
            who = f"{_ranks(sorted(set(self.suspects)))} point at a different rendezvous"
        else:
            who = "all ranks are present, so the rendezvous itself is failing"
        return (
            "init",
            (0.85 if waiting else 0.6) * damp,
            f"Stuck at initialisation: {_ranks(waiting) if waiting else 'no rank'} wait in "
            f"init_process_group and no step completed; {who}. Check MASTER_ADDR/MASTER_PORT"
            f"{where}, DNS, firewall and the launcher.",
        )

    def _a_lost(self, lost, exited, in_collective, ops, first_fr, stuck_hint, damp):
        first = self._first_leaver(lost)
        ordered = [first, *[r for r in lost if r != first]] if first is not None else lost
        # Ranks the launcher stopped after another rank failed are victims, not suspects.
        culprits = [
            r
            for r in ordered
            if r not in self.ranks or self.ranks[r].exit_code not in TERMINATED_BY_LAUNCHER
        ]
        self._suspect(culprits or ordered)
        strong = False
        for rank in ordered[:10]:
            strong |= self._lost_evidence(rank)
        if first_fr:
            self._fr_evidence(first_fr)
        waiting = sorted(s.rank for s in in_collective)
        op = ops.most_common(1)[0][0] if ops else None
        if waiting:
            self._stack_evidence(waiting[0])
        for name, facts in self.snap.nodes.items():
            if facts.status != "ok":
                self.suspect_nodes.add(name)  # the missing ranks may well live there
        head = ordered[0]
        why = self._why_lost(head)
        node = self.rank_node.get(head)
        rest = f"; {_ranks(waiting)} wait in {op}" if waiting and op else ""
        step = self._step_of(waiting or list(self.ranks))
        step_text = f" after step {step}" if step is not None else ""
        where = f" on {node}" if node else ""
        more = f" (missing or exited: {compact_ranks(lost)})" if len(lost) > 1 else ""
        return (
            "A",
            (0.95 if strong else 0.8 if waiting else 0.65) * damp,
            f"Rank {head} did not come: {why}{where}{more}{rest}{step_text}. "
            f"Read rank {head}'s log tail and {node or 'its node'}'s dmesg.{stuck_hint}",
        )

    def _a_outside(self, outside, in_collective, ops, first_fr, stuck_hint, damp):
        self._suspect(outside)
        for rank in outside[:5]:
            self._stack_evidence(rank)
        waiting = sorted(s.rank for s in in_collective)
        self._stack_evidence(waiting[0])
        if first_fr:
            self._fr_evidence(first_fr)
        op = ops.most_common(1)[0][0]
        frame = self.ranks[outside[0]].innermost_frame
        nodes = sorted({self.rank_node[r] for r in outside})
        step = self._step_of(waiting)
        step_text = f" after step {step}" if step is not None else ""
        agrees = (
            first_fr is not None
            and first_fr["kind"] == "missing_ranks"
            and set(first_fr["missing_rank_list"]) <= set(outside)
        )
        return (
            "A",
            (0.9 if agrees else 0.8) * damp,
            f"{_ranks(outside).capitalize()} did not come: alive but stuck outside any "
            f"collective in {frame}, while {_ranks(waiting)} wait in {op}"
            f"{step_text}. Look at {', '.join(nodes[:5])}: data loading, I/O, locks.{stuck_hint}",
        )

    def _b_flight_recorder(self, first_fr, ops, damp):
        collectives = first_fr["collectives"]
        minority = [r for c in collectives[1:] for r in c["rank_list"]]
        self._suspect(minority)
        self._fr_evidence(first_fr)
        for rank in minority[:3]:
            self._stack_evidence(rank)
        majority = collectives[0]
        parts = "; ".join(
            f"{_ranks(c['rank_list'])} {'runs' if len(c['rank_list']) == 1 else 'run'} "
            f"{c['signature']}"
            for c in collectives[:3]
        )
        where = self._frame_of(minority, fallback=collectives[1]["frame"])
        return (
            "B",
            0.9 * damp,
            f"Ranks run different collectives at #{first_fr['seq']} of group {first_fr['pg']}: "
            f"{parts}. {_ranks(minority).capitalize()} left the others' order "
            f"(majority: {majority['op']}); look for a rank-dependent branch near {where}.",
        )

    def _b_stacks(self, in_collective, ops, mismatch_lines, damp):
        by_op: dict[str, list[int]] = defaultdict(list)
        for state in in_collective:
            by_op[base_name(state.frame_name)].append(state.rank)
        ordered = sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        minority = [r for _, ranks in ordered[1:] for r in ranks]
        for fact in mismatch_lines[:3]:
            self._add("log_error", None, fact.rank, fact.line)
        self._suspect(minority)
        for rank in minority[:3]:
            self._stack_evidence(rank)
        if ordered:
            self._stack_evidence(ordered[0][1][0])
        parts = "; ".join(f"{_ranks(r)} in {op}" for op, r in ordered[:3])
        return (
            "B",
            (0.8 if len(ordered) > 1 else 0.7) * damp,
            f"Ranks are in different collectives: {parts or 'see mismatch report'}. "
            f"Look for a rank-dependent branch near {self._frame_of(minority)}.",
        )

    def _b_call_sites(self, in_collective, signatures, damp):
        by_sig: dict[str, list[int]] = defaultdict(list)
        for state in in_collective:
            by_sig[state.stack_signature].append(state.rank)
        ordered = sorted(by_sig.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        minority = [r for _, ranks in ordered[1:] for r in ranks]
        self._suspect(minority)
        for rank in [ordered[0][1][0], *minority[:3]]:
            self._stack_evidence(rank)
        op = base_name(in_collective[0].frame_name)
        return (
            "B",
            0.55 * damp,
            f"All ranks are in {op} but from different call sites: {_ranks(minority)} "
            f"call it elsewhere than {_ranks(ordered[0][1])}. "
            "Compare the stacks: a rank-dependent branch?",
        )

    def _c(self, in_collective, ops, diffs, shell, progress, damp):
        op = ops.most_common(1)[0][0]
        waiting = sorted(s.rank for s in in_collective)
        self._stack_evidence(waiting[0])
        real = [d for d in diffs if not d["expected_per_rank"]]
        found = []
        for diff in real:
            ranks = sorted(minority_ranks(diff, self.snap.env, self.rank_node, shell))
            self._suspect(ranks)
            self._add("env_diff", None, ranks[0] if len(ranks) == 1 else None, _diff_text(diff))
            found.append(diff["name"])
        for item in shell:
            self.suspect_nodes.add(item["node"])
            found.append(f"{item['name']} in {item['path']} on {item['node']}")
        fatal = [
            (n, x) for n, f in sorted(self.snap.nodes.items()) for x in f.kernel.xids if x.fatal
        ]
        for node, xid in fatal:
            self.suspect_nodes.add(node)
            found.append(f"Xid {xid.xid} on {node}")
        for _, log in self.snap.logs:
            for fact in log.nccl_warn[-2:]:
                self._add("nccl_warn", None, fact.rank, fact.line)
        step = self._step_of(waiting)
        step_text = f" after step {step}" if step is not None else ""
        lead = (
            f"All {len(waiting)} ranks are present and wait in the same {op}{step_text}; "
            "nobody is missing."
        )
        if found:
            return (
                "C",
                0.75 * damp,
                f"{lead} Look at the environment and network: {', '.join(found[:3])}.",
            )
        return (
            "C",
            0.5 * damp,
            f"{lead} No environment difference found: check the network "
            "(NCCL_SOCKET_IFNAME, IB links, ibstat) and NCCL WARN lines.",
        )

    # ---------------------------------------------------------------- helpers
    def _lagging(self, watchdog) -> list[int]:
        lagging: set[int] = set()
        if watchdog:
            lagging.update(watchdog.get("lagging_ranks") or [])
        for _, log in self.snap.logs:
            lagging.update(log.lagging)
        steps = {r: s.last_step for r, s in self.ranks.items() if s.last_step is not None}
        if steps and not self.snap.has_process_evidence and len(set(steps.values())) > 1:
            top = max(steps.values())
            lagging.update(r for r, v in steps.items() if v < top)
        reporting = {rank for _, rank, _ in self.snap.watchdog if rank is not None}
        if not self.snap.has_process_evidence and len(reporting) >= len(steps) / 2:
            # Logs only: a rank whose watchdog stayed silent while the others' fired was not
            # waiting in that collective.
            lagging.update(r for r in steps if r not in reporting)
        return sorted(lagging)

    def _first_leaver(self, lost: list[int]) -> int | None:
        oom_pids = self._oom_by_pid
        for rank in lost:
            state = self.ranks.get(rank)
            if state and state.pid in oom_pids:
                return rank
        for rank in lost:
            state = self.ranks.get(rank)
            if (
                state
                and state.exit_code is not None
                and (state.exit_code not in TERMINATED_BY_LAUNCHER)
            ):
                return rank
        return lost[0] if lost else None

    @cached_property
    def _oom_by_pid(self) -> dict[int, tuple[str, str, bool]]:
        """pid -> (node, line, recent): every kill, since a pid match is decisive at any age."""
        pids = {}
        for node, facts in self.snap.nodes.items():
            recent = {id(k) for k in self._job_kills(facts)}
            for kill in facts.kernel.oom_kills:
                pids[kill.pid] = (node, kill.line, id(kill) in recent)
        return pids

    @cached_property
    def _kills_since(self) -> datetime | None:
        """When the job's first rank started, less the slack; None when no rank says."""
        started = [s.started_at for s in self.ranks.values() if s.started_at is not None]
        return min(started) - JOB_START_SLACK if started else None

    def _job_kills(self, facts) -> list:
        """OOM kills that can belong to this job: not stamped before its first rank started
        (dmesg keeps kills from days ago; they explain nothing about tonight's hang)."""
        since = self._kills_since
        if since is None:
            return facts.kernel.oom_kills
        return [k for k in facts.kernel.oom_kills if k.at is None or k.at >= since]

    def _known_pid(self, rank: int) -> int | None:
        state = self.ranks.get(rank)
        if state and state.pid is not None:
            return state.pid
        if self.prev and rank in self.prev.ranks:
            return self.prev.ranks[rank].pid
        return None

    def _why_lost(self, rank: int) -> str:
        state = self.ranks.get(rank)
        pid = self._known_pid(rank)
        oom = self._oom_by_pid
        if pid is not None and pid in oom:
            return f"its process {pid} was killed by the OOM killer"
        if state and state.exit_code is not None:
            meaning = EXIT_MEANING.get(state.exit_code, "")
            return f"it exited with code {state.exit_code}" + (f" ({meaning})" if meaning else "")
        if state and state.state == "Z":
            return "its process is a zombie (exited)"
        node = self.snap.nodes.get(self.rank_node.get(rank, ""))
        if node is not None and node.status != "ok":
            return f"its node gave no evidence ({node.status})"
        silent = sorted(n for n, f in self.snap.nodes.items() if f.status != "ok")
        if state is None and silent:
            return f"not found; node(s) {', '.join(silent[:5])} gave no evidence"
        if state is None:
            return "no process and no log line of it were found on any node"
        return "its process is gone (seen in the logs, not in ps)"

    def _lost_evidence(self, rank: int) -> bool:
        """Quote why a rank is gone; True when a decisive line (OOM, exit, Xid) was found."""
        state = self.ranks.get(rank)
        node = self.rank_node.get(rank)
        strong = False
        pid = self._known_pid(rank)
        for kill_pid, (kill_node, line, recent) in sorted(self._oom_by_pid.items()):
            if kill_pid == pid or (kill_node == node and pid is None and recent):
                self._add("dmesg_oom", kill_node, rank, line)
                self.suspect_nodes.add(kill_node)
                strong = True
        if node and node in self.snap.nodes:
            for xid in self.snap.nodes[node].kernel.xids:
                self._add("xid", node, rank, f"{xid.line}  [{xid.meaning}]")
                strong = strong or xid.fatal
            for seg in self.snap.nodes[node].kernel.segfaults:
                if pid is None or seg.pid == pid:
                    self._add("segfault", node, rank, seg.line)
                    strong = True
        if state and state.exit_code is not None:
            meaning = EXIT_MEANING.get(state.exit_code, "")
            fallback = f"exit code {state.exit_code}" + (f" ({meaning})" if meaning else "")
            self._add("exit_code", node, rank, state.exit_line or fallback)
            strong = strong or state.exit_code not in TERMINATED_BY_LAUNCHER
        for node_name, log in self.snap.logs:
            local = self._local_map(node_name)
            mine = [fact for fact in log.errors if line_rank(fact, local) == rank]
            for fact in mine[:3]:
                self._add("log_error", node_name, rank, fact.line)
        if state is None or (not state.process_seen and state.exit_code is None):
            self._add("missing", node, rank, f"rank {rank}: {self._why_lost(rank)}")
        return strong

    def _local_map(self, node: str) -> dict[int, int]:
        if not self._local_maps:
            for state in self.ranks.values():
                if state.local_rank is not None:
                    local = self._local_maps.setdefault(state.node, {})
                    if state.process_seen or state.local_rank not in local:
                        local[state.local_rank] = state.rank
        return self._local_maps.get(node, {})

    def _node_evidence(self, shell: list[dict]) -> None:
        for node, facts in sorted(self.snap.nodes.items()):
            if facts.status != "ok":
                self._add("node_unreachable", node, None, facts.status)
            for xid in facts.kernel.xids:
                if xid.fatal:
                    self.suspect_nodes.add(node)
                self._add("xid", node, None, f"{xid.line}  [{xid.meaning}]")
            for kill in self._job_kills(facts):
                self._add("dmesg_oom", node, None, kill.line)
            busy = [g for g in facts.gpus.gpus if g.utilization is not None]
            # GPU load says most on the suspects' nodes (100 % idle-spin vs 0 % CPU-side).
            if busy and (node in self.suspect_nodes or len(self.snap.nodes) <= 8):
                text = ", ".join(
                    f"GPU {g.index} {g.utilization}% ({g.memory_used_mib}MiB)" for g in busy[:8]
                )
                self._add("gpu", node, None, text)
        for item in shell:
            self._add("shell_init", item["node"], None, item["line"])

    def _stack_evidence(self, rank: int) -> None:
        state = self.ranks.get(rank)
        if state is None or not state.stack:
            return
        self._add("stack", state.node, rank, state.innermost_frame or state.stack[0])
        if state.gpu_util is not None:
            # 100 % without progress = NCCL spinning in a collective; 0 % with memory held =
            # stuck on the CPU side (data, I/O, a lock).
            reading = (
                "spinning in a collective"
                if state.gpu_util >= 90
                else "stuck on the CPU side"
                if state.gpu_util <= 5 and (state.gpu_memory_mib or 0) > 0
                else "partly busy"
            )
            self._add(
                "gpu",
                state.node,
                rank,
                f"GPU {state.gpu} at {state.gpu_util}% holding {state.gpu_memory_mib}MiB: "
                f"{reading}",
            )

    def _fr_evidence(self, first: dict) -> None:
        parts = "; ".join(
            f"{_ranks(c['rank_list'])}: {c['signature']}" for c in first["collectives"]
        )
        lost = first["missing_rank_list"]
        missing = f"; missing on {_ranks(lost)}" if lost else ""
        self._add(
            "flight_recorder",
            None,
            None,
            f"first unmatched collective: group {first['pg']} #{first['seq']}: {parts}{missing}",
        )

    def _add_progress(self, progress: dict) -> None:
        self._add("progress", None, None, _step_desc(progress))

    def _frame_of(self, ranks: list[int], fallback: str = "") -> str:
        for rank in ranks:
            state = self.ranks.get(rank)
            if state and len(state.stack) > 2:
                # The first frame outside torch is the user's call site.
                for frame in state.stack:
                    if not frame.split("(")[-1].startswith("torch/"):
                        return frame
            if state and state.innermost_frame and not fallback:
                return state.innermost_frame
        return fallback or "the collective call sites"

    def _step_of(self, ranks: list[int]) -> int | None:
        steps = [self.ranks[r].last_step for r in ranks if r in self.ranks]
        known = [s for s in steps if s is not None]
        return max(known) if known else None

    def _suspect(self, ranks: list[int]) -> None:
        self.suspects.extend(ranks)

    def _add(self, kind: str, node: str | None, rank: int | None, text: str) -> None:
        # A line already quoted for a rank is not quoted again for its node alone.
        key, quoted = (kind, node, rank, text), (kind, node, None, text)
        if key not in self._evidence_keys and quoted not in self._evidence_keys:
            self._evidence_keys.update({key, quoted})
            self.evidence.append({"kind": kind, "node": node, "rank": rank, "text": text})

    def _ordered_evidence(self, suspects: set[int]) -> list[dict]:
        # Suspects' evidence first, then the rest in the order it was found; bounded in size.
        ordered = sorted(
            enumerate(self.evidence),
            key=lambda pair: (
                0 if pair[1]["rank"] in suspects or pair[1]["node"] in self.suspect_nodes else 1,
                pair[0],
            ),
        )
        return [item for _, item in ordered[:_EVIDENCE_CAP]]

    def _per_rank(self, missing, exited, seen, suspects, groups) -> list[dict]:
        group_of = {}
        for group in groups:
            for rank in group["rank_list"]:
                group_of.setdefault(rank, group["index"])
        rows = []
        for rank in sorted(set(range(self.world)) | set(self.ranks)):
            state = self.ranks.get(rank)
            if rank in exited:
                status = "exited"
            elif rank in missing or state is None:
                status = "missing"
            elif state.frame_kind == "collective":
                status = "in_collective"
            elif state.frame_kind in ("init", "outside"):
                status = state.frame_kind
            elif state.process_seen:
                status = "no_stack"
            else:
                status = "log_only"
            rows.append(
                {
                    "rank": rank,
                    "node": state.node if state else None,
                    "pid": state.pid if state else None,
                    "state": state.state if state else "",
                    "local_rank": state.local_rank if state else None,
                    "status": status,
                    "suspect": rank in suspects,
                    "last_step": state.last_step if state else None,
                    "last_step_at": _iso(state.last_step_at) if state else None,
                    "step_time": state.step_time if state else None,
                    "frame": state.innermost_frame if state else "",
                    "stack_signature": state.stack_signature if state else "",
                    "stack_group": group_of.get(rank),
                    "exit_code": state.exit_code if state else None,
                    "gpu_util": state.gpu_util if state else None,
                }
            )
        return rows


def _ranks(ranks: list[int]) -> str:
    """ "rank 3" or "ranks 0-2, 5": how the summary names a set of ranks."""
    return f"rank {ranks[0]}" if len(set(ranks)) == 1 else f"ranks {compact_ranks(ranks)}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _op_of(first: dict) -> str:
    return first["collectives"][0]["op"] if first["collectives"] else "?"


def _diff_text(diff: dict) -> str:
    parts = []
    for value in diff["values"][:4]:
        nodes = ", ".join(value["nodes"][:3]) + ("..." if value["node_count"] > 3 else "")
        on = f"rank {value['ranks']}" if value["rank_count"] == 1 else f"ranks {value['ranks']}"
        parts.append(f"{value['value']!s} on {on} ({nodes})")
    return f"{diff['name']}: " + "; ".join(parts)


def _step_desc(progress: dict) -> str:
    if progress.get("method") == "two_snapshots" and "step_before" in progress:
        return f"step {progress['step_before']} -> {progress['step_after']} between snapshots"
    if progress.get("method") == "last_step_age":
        return f"last step {progress['age_s']} s ago"
    return "progress unknown"
