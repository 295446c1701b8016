"""Every rule on its own: the evidence it speaks on, and evidence where it must stay silent.

Rules are called directly on Facts built from real captured evidence (tests/analysis/samples)
or from small log-only snapshots around published lines, so each test pins one rule.
"""

import copy
import json
from datetime import UTC, datetime, timedelta

from analysis import rules
from analysis.evidence import NodeEvidence, SnapshotEvidence, not_gathered
from analysis.facts import build_facts
from analysis.snapshot_parse import parse_snapshot
from analysis.verdict import SECOND_SNAPSHOT
from tests.analysis.sample_evidence import (
    diagnosis_json,
    drop_rank_process,
    load_snapshot,
    pid_of_rank,
    split_nodes,
)

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)


def facts_of(evidence, previous=None):
    prev = parse_snapshot(previous) if previous is not None else None
    return build_facts(parse_snapshot(evidence), prev)


def step_lines(
    rank: int, steps: int, start: datetime = T0, step_s: float = 1.0, timed: bool = True
) -> str:
    """Lab-style step lines; `timed=False` leaves out step_time= (then only timestamps say)."""
    lines = []
    for step in range(1, steps + 1):
        at = start + timedelta(seconds=step * step_s)
        stamp = at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"
        took = f" step_time={step_s}s" if timed else ""
        lines.append(f"{stamp} INFO [rank{rank}] host=h{rank} step={step}{took}")
    return "\n".join(lines) + "\n"


def logs_only(per_rank: dict[int, str], world: int, at: datetime, nodes: int = 1):
    """A `kubectl logs` style bundle: one log per rank, ranks spread over `nodes` nodes."""
    evidence = [NodeEvidence(node=f"node-{i}", hostname=f"node-{i}") for i in range(nodes)]
    per_node = max(1, world // nodes)
    for rank, text in per_rank.items():
        evidence[min(rank // per_node, nodes - 1)].logs[f"/logs/rank{rank}.log"] = text
    return SnapshotEvidence(nodes=evidence, expected_world_size=world, collected_at=at)


def same_stack_everywhere(snapshot):
    """The captured hang with rank 3 brought into the others' all_reduce."""
    changed = copy.deepcopy(snapshot)
    node = changed.nodes[0]
    node.pyspy[pid_of_rank(node, 3)] = node.pyspy[pid_of_rank(node, 0)]
    return changed


# ------------------------------------------------------------------ no_evidence


def test_no_evidence_speaks_on_an_empty_snapshot():
    verdict = rules.no_evidence(facts_of(SnapshotEvidence(nodes=[NodeEvidence(node="n0")])))
    assert verdict is not None and verdict.classification == "unknown"


def test_no_evidence_is_silent_when_there_are_ranks():
    assert rules.no_evidence(facts_of(load_snapshot("outside"))) is None


# ------------------------------------------------------------------ moving / healthy


def test_moving_calls_a_job_healthy_when_steps_advance_between_snapshots():
    facts = facts_of(load_snapshot("healthy", "snap1"), load_snapshot("healthy", "snap0"))
    verdict = rules.moving(facts)
    assert verdict is not None and verdict.classification == "healthy"


def test_moving_is_silent_after_one_step_and_silence():
    # One step, nothing since: no step time to compare the silence with, nothing proves motion.
    texts = {r: step_lines(r, 1, timed=False) for r in range(4)}
    evidence = logs_only(texts, 4, T0 + timedelta(minutes=5))
    facts = facts_of(evidence)
    assert facts.progress.progressing is None
    assert rules.moving(facts) is None


def test_moving_is_silent_when_the_last_step_is_many_step_times_old():
    evidence = logs_only({r: step_lines(r, 20) for r in range(4)}, 4, T0 + timedelta(seconds=60))
    facts = facts_of(evidence)
    assert facts.progress.progressing is False
    assert facts.progress.threshold_s == 5.0
    assert rules.moving(facts) is None


def test_moving_calls_recent_steps_within_a_few_step_times_healthy():
    evidence = logs_only({r: step_lines(r, 20) for r in range(4)}, 4, T0 + timedelta(seconds=22))
    verdict = rules.moving(facts_of(evidence))
    assert verdict is not None and verdict.classification == "healthy"


def test_a_rank_gone_outweighs_steps_however_recent():
    later = drop_rank_process(load_snapshot("healthy", "snap1"), 2)
    facts = facts_of(later, load_snapshot("healthy", "snap0"))
    assert facts.progress.progressing is True
    assert facts.missing == (2,)
    assert rules.moving(facts).classification == "healthy"  # the steps alone say so
    verdict = rules.decide(facts)
    assert verdict.classification == "A" and verdict.suspects == (2,)
    assert "healthy" in {a.classification for a in verdict.alternatives}
    assert diagnosis_json(later, load_snapshot("healthy", "snap0"))["classification"] == "A"


def test_moving_learns_the_step_time_from_timestamps_when_lines_do_not_say():
    texts = {r: step_lines(r, 20, step_s=2.0, timed=False) for r in range(4)}
    facts = facts_of(logs_only(texts, 4, T0 + timedelta(seconds=90)))
    assert facts.progress.step_time_s == 2.0
    assert facts.progress.threshold_s == 10.0
    assert facts.progress.progressing is False


def test_a_stuck_verdict_without_proof_asks_for_a_second_snapshot_first():
    # One look at the captured hang: stacks say rank 3 is outside the collective, but nothing
    # (no old step, no watchdog) proves the job stopped.
    snapshot = load_snapshot("outside")
    for text in snapshot.nodes[0].logs:
        snapshot.nodes[0].logs[text] = ""
    snapshot.nodes[0].flight_recorder.clear()
    result = diagnosis_json(snapshot)
    assert result["classification"] == "A"
    assert result["next_steps"][0] == SECOND_SNAPSHOT


def test_watchdog_timeouts_prove_the_job_stopped():
    texts = {r: step_lines(r, 1, timed=False) for r in range(4)}
    evidence = logs_only(texts, 4, T0 + timedelta(minutes=5))
    for rank in range(3):
        evidence.nodes[0].logs[f"/logs/rank{rank}.log"] += (
            f"[rank{rank}]:[E ProcessGroupNCCL.cpp:737] [Rank {rank}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=6, OpType=ALLREDUCE, Timeout(ms)=600000) ran "
            "for 600060 milliseconds before timing out.\n"
        )
    result = diagnosis_json(evidence)
    assert result["classification"] != "healthy"
    assert SECOND_SNAPSHOT not in result["next_steps"]
    assert "slow or dead?" not in result["summary"]


# ------------------------------------------------------------------ straggler


def test_straggler_names_a_rank_from_per_rank_step_times():
    texts = {r: step_lines(r, 20, step_s=1.0) for r in range(7)}
    texts[7] = step_lines(7, 20, step_s=3.0)
    evidence = logs_only(texts, 8, T0 + timedelta(seconds=24), nodes=2)
    verdict = rules.straggler(facts_of(evidence))
    assert verdict is not None and verdict.classification == "straggler"
    assert verdict.suspects == (7,)


def test_straggler_does_not_call_half_the_job_stragglers():
    texts = {r: step_lines(r, 20, step_s=1.0 if r < 4 else 3.0) for r in range(8)}
    facts = facts_of(logs_only(texts, 8, T0 + timedelta(seconds=24), nodes=2))
    assert rules.straggler(facts) is None
    assert rules.decide(facts).classification == "healthy"


# ------------------------------------------------------------------ departed / lost


def test_departed_names_the_rank_that_exited_not_the_ones_the_launcher_stopped():
    verdict = rules.departed(facts_of(load_snapshot("crash")))
    assert verdict is not None and verdict.classification == "A"
    assert verdict.suspects == (2,)


def test_departed_is_silent_when_every_rank_is_alive():
    assert rules.departed(facts_of(load_snapshot("outside"))) is None


def test_lost_names_a_rank_gone_from_ps():
    verdict = rules.lost(facts_of(drop_rank_process(load_snapshot("outside"), 1)))
    assert verdict is not None and verdict.suspects == (1,)
    assert any(e.kind == "missing" and e.rank == 1 for e in verdict.evidence)


def test_lost_is_silent_on_a_logs_only_bundle_without_a_rank():
    texts = {r: step_lines(r, 5) for r in (0, 2, 3)}
    facts = facts_of(logs_only(texts, 4, T0 + timedelta(minutes=5)))
    assert facts.unobserved == (1,)
    assert rules.lost(facts) is None


# ------------------------------------------------------------------ init


def test_init_speaks_when_ranks_wait_in_the_rendezvous():
    verdict = rules.init(facts_of(load_snapshot("init")))
    assert verdict is not None and verdict.classification == "init"


def test_init_is_silent_once_training_ran():
    assert rules.init(facts_of(load_snapshot("outside"))) is None


def test_init_is_silent_on_logs_without_steps_that_show_collectives_completed():
    # Logs without step lines are no proof of an init hang: the watchdog says work completed.
    line = (
        "[rank{r}]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        "0(default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at "
        "work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.\n"
    )
    texts = {r: line.format(r=r) for r in range(4)}
    assert rules.init(facts_of(logs_only(texts, 4, T0))) is None


# ------------------------------------------------------------------ unreachable


def test_unreachable_points_at_a_node_that_gave_nothing():
    snapshot = split_nodes(same_stack_everywhere(load_snapshot("outside")))
    snapshot.nodes[1] = NodeEvidence(
        node="lab-node-1", status=not_gathered("unreachable: timed out")
    )
    verdict = rules.unreachable(facts_of(snapshot))
    assert verdict is not None and verdict.suspect_nodes == ("lab-node-1",)
    assert verdict.suspects == ()


def test_unreachable_is_silent_when_every_node_answered():
    assert rules.unreachable(facts_of(split_nodes(load_snapshot("outside")))) is None


# ------------------------------------------------------------------ B from the flight recorder


def test_fr_different_collective_names_the_odd_rank():
    verdict = rules.fr_different_collective(facts_of(load_snapshot("mismatch")))
    assert verdict is not None and verdict.classification == "B"
    assert verdict.suspects == (0,)


def test_fr_different_collective_breaks_a_two_rank_tie_with_the_other_groups():
    # Tensor-parallel group {2, 3}: rank 3 runs all_gather, rank 2 all_reduce as group {0, 1}.
    verdict = rules.fr_different_collective(facts_of(load_snapshot("tp-mismatch")))
    assert verdict is not None and verdict.suspects == (3,)


def test_fr_different_collective_is_silent_when_only_a_rank_is_missing():
    assert rules.fr_different_collective(facts_of(load_snapshot("outside"))) is None


# ------------------------------------------------------------------ B from the logs


def _watchdog(rank: int, seq: int, op: str, numel: int) -> str:
    return (
        f"[rank{rank}]:[E ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, "
        f"NumelOut={numel}, Timeout(ms)=600000) ran for 600143 milliseconds before timing out.\n"
    )


def test_logs_different_collective_finds_another_op_at_the_same_seqnum():
    texts = {r: step_lines(r, 3) + _watchdog(r, 41, "ALLREDUCE", 1024) for r in range(3)}
    texts[3] = step_lines(3, 3) + _watchdog(3, 41, "_ALLGATHER_BASE", 1024)
    verdict = rules.logs_different_collective(facts_of(logs_only(texts, 4, T0)))
    assert verdict is not None and verdict.classification == "B"
    assert verdict.suspects == (3,)
    assert any(e.rank == 3 and "_ALLGATHER_BASE" in e.text for e in verdict.evidence)


def test_logs_different_collective_finds_another_size_at_the_same_seqnum():
    texts = {r: _watchdog(r, 41, "ALLREDUCE", 1024) for r in range(4)}
    texts[1] = _watchdog(1, 41, "ALLREDUCE", 2048)
    verdict = rules.logs_different_collective(facts_of(logs_only(texts, 4, T0)))
    assert verdict is not None and verdict.suspects == (1,)


def test_logs_different_collective_is_silent_when_all_agree():
    texts = {r: _watchdog(r, 41, "ALLREDUCE", 1024) for r in range(4)}
    assert rules.logs_different_collective(facts_of(logs_only(texts, 4, T0))) is None


# ------------------------------------------------------------------ A: outside the collective


def test_outside_collective_names_the_rank_elsewhere_and_agrees_with_the_flight_recorder():
    verdict = rules.outside_collective(facts_of(load_snapshot("tp-rank-stall")))
    assert verdict is not None and verdict.suspects == (3,)
    assert verdict.strength >= 0.85  # the groups' flight records stop at rank 3 too


def test_outside_collective_is_silent_when_everyone_is_in_a_collective():
    assert rules.outside_collective(facts_of(load_snapshot("mismatch"))) is None


# ------------------------------------------------------------------ B from stacks


def test_stacks_different_collective_speaks_without_a_flight_recorder():
    snapshot = load_snapshot("mismatch")
    snapshot.nodes[0].flight_recorder = {}
    verdict = rules.stacks_different_collective(facts_of(snapshot))
    assert verdict is not None and verdict.classification == "B"


def test_stacks_different_collective_is_silent_on_one_op():
    facts = facts_of(same_stack_everywhere(load_snapshot("outside")))
    assert rules.stacks_different_collective(facts) is None


def test_different_call_sites_speaks_when_one_rank_calls_from_elsewhere():
    snapshot = same_stack_everywhere(load_snapshot("outside"))
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 3)
    threads = json.loads(node.pyspy[pid])
    main = next(t for t in threads if t["thread_name"] == "MainThread")
    main["frames"][-1]["line"] += 7  # the same all_reduce, reached from another line
    node.pyspy[pid] = json.dumps(threads)
    facts = facts_of(snapshot)
    assert len(facts.signatures) == 2
    verdict = rules.different_call_sites(facts)
    assert verdict is not None and verdict.suspects == (3,)


def test_different_call_sites_is_silent_on_one_call_site():
    facts = facts_of(same_stack_everywhere(load_snapshot("outside")))
    assert rules.different_call_sites(facts) is None


# ------------------------------------------------------------------ A from the flight recorder


def test_fr_never_reached_tells_the_culprit_from_a_victim_of_another_group():
    # Data + tensor parallel: rank 3 stalled; rank 2 waits for it in their tensor-parallel
    # all_reduce, so rank 2 never reached the data-parallel one rank 0 waits in. Rank 2 is a
    # victim, rank 3 the culprit: no stacks, the flight recorder alone must say so.
    snapshot = load_snapshot("tp-rank-stall")
    snapshot.nodes[0].pyspy = {}
    verdict = rules.fr_never_reached(facts_of(snapshot))
    assert verdict is not None and verdict.suspects == (3,)
    assert "rank 2 wait" in verdict.summary


def test_fr_never_reached_is_silent_when_all_ranks_entered():
    assert rules.fr_never_reached(facts_of(load_snapshot("mismatch"))) is None


# ------------------------------------------------------------------ lagging


def _progress_line(rank: int, completed: int) -> str:
    return (
        f"[rank{rank}]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        f"0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by watchdog "
        f"at work: {completed + 1}, last enqueued NCCL work: {completed + 3}, last completed "
        f"NCCL work: {completed}.\n"
    )


def test_lagging_names_the_rank_whose_last_completed_collective_is_behind():
    texts = {r: _progress_line(r, 807) for r in range(4)}
    texts[2] = _progress_line(2, 800)
    verdict = rules.lagging(facts_of(logs_only(texts, 4, T0)))
    assert verdict is not None and verdict.suspects == (2,)
    assert verdict.evidence and verdict.evidence[0].rank == 2


def test_lagging_is_silent_when_every_rank_is_at_the_same_place():
    texts = {r: _progress_line(r, 807) for r in range(4)}
    assert rules.lagging(facts_of(logs_only(texts, 4, T0))) is None


# ------------------------------------------------------------------ C: same collective, env


def test_same_collective_speaks_when_everyone_waits_in_one_op():
    verdict = rules.same_collective(facts_of(same_stack_everywhere(load_snapshot("outside"))))
    assert verdict is not None and verdict.classification == "C"


def test_same_collective_is_silent_with_a_rank_outside():
    assert rules.same_collective(facts_of(load_snapshot("outside"))) is None


def test_cpu_side_speaks_when_no_rank_is_in_a_collective():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    for rank in range(3):
        node.pyspy[pid_of_rank(node, rank)] = node.pyspy[pid_of_rank(node, 3)]
    verdict = rules.cpu_side(facts_of(snapshot))
    assert verdict is not None and verdict.suspects == (0, 1, 2, 3)


def test_cpu_side_is_silent_when_ranks_wait_in_a_collective():
    assert rules.cpu_side(facts_of(load_snapshot("outside"))) is None


def test_likeliest_calls_every_rank_of_the_world_timing_out_together_c():
    texts = {r: step_lines(r, 3) + _watchdog(r, 41, "ALLREDUCE", 1024) for r in range(4)}
    verdict = rules.likeliest(facts_of(logs_only(texts, 4, T0 + timedelta(minutes=20))))
    assert verdict is not None and verdict.classification == "C"
    assert "#41 (ALLREDUCE)" in verdict.summary
    assert verdict.suspects == () and verdict.strength < 0.5 and verdict.check


def test_likeliest_calls_some_ranks_timing_out_a_rank_that_did_not_come():
    # Ranks 0-3 of 8 report; the other four left nothing: the one the others wait for may be
    # among them, and nothing names it.
    texts = {r: step_lines(r, 3) + _watchdog(r, 41, "ALLREDUCE", 1024) for r in range(4)}
    verdict = rules.likeliest(facts_of(logs_only(texts, 8, T0 + timedelta(minutes=20))))
    assert verdict is not None and verdict.classification == "A"
    assert verdict.suspects == () and "4-7 left no evidence" in verdict.summary


def test_likeliest_is_silent_when_nothing_names_a_rank_or_node():
    facts = facts_of(SnapshotEvidence(nodes=[NodeEvidence(node="n0", dmesg="[0.0] Linux\n")]))
    assert rules.likeliest(facts) is None
    assert rules.decide(facts).classification == "unknown"


def test_a_job_whose_steps_stopped_with_nothing_else_gets_a_class_not_unknown():
    facts = facts_of(
        logs_only({r: step_lines(r, 20) for r in range(4)}, 4, T0 + timedelta(hours=1))
    )
    assert facts.progress.progressing is False
    verdict = rules.decide(facts)
    assert verdict.classification == "A" and verdict.rule == "likeliest"
    assert verdict.check and verdict.confidence < 0.5


def test_the_rules_run_in_the_order_the_module_documents():
    names = [rule.__name__ for rule in rules.RULES]
    assert names.index("moving") < names.index("departed") < names.index("init")
    assert names.index("fr_different_collective") < names.index("outside_collective")
    assert names.index("peer_named") < names.index("lagging") < names.index("same_collective")


def test_departed_points_at_the_node_when_a_dying_process_names_no_rank():
    evidence = logs_only({}, 4, T0)
    evidence.nodes[0].logs["/logs/server.log"] = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f2ea0870640 (most "
        "recent call first):\n"
    )
    verdict = rules.departed(facts_of(evidence))
    assert verdict is not None and verdict.classification == "A"
    assert verdict.suspects == () and verdict.suspect_nodes == ("node-0",)


def test_a_straggler_detector_report_is_a_heartbeat_not_a_straggler_without_a_spread():
    # Megatron names a slowest rank in every report; 3,468 ms against 3,453 ms is no straggler.
    line = (
        " 0: INFO:megatron.core.utils:[2026-11-29 09:00:00] | MnRtt/Rnk: 3453.08ms/8 | "
        "MxRtt/Rnk: 3468.20ms/0 | MnPwr/Rnk: 601796W/8 | MxPwr/Rnk: 683801W/18\n"
    )
    evidence = logs_only({0: line * 3}, 1, T0 + timedelta(seconds=4))
    facts = facts_of(evidence)
    assert facts.progress.progressing is True
    assert rules.straggler(facts) is None
    assert rules.decide(facts).classification == "healthy"
    slow = line.replace("3468.20ms/0", "9468.20ms/3")
    facts = facts_of(logs_only({0: slow * 3}, 4, T0 + timedelta(seconds=4)))
    assert rules.straggler(facts).suspects == (3,)


def test_init_speaks_when_the_agents_never_reached_the_rendezvous():
    # pytorch/pytorch#79388: both agents time out on the c10d store; no worker ever started.
    line = (
        "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to "
        "connect to (IP1, 2222).\n"
    )
    evidence = logs_only({}, 2, T0, nodes=2)
    for node in evidence.nodes:
        node.logs["/logs/torchrun.log"] = line
    verdict = rules.init(facts_of(evidence))
    assert verdict is not None and verdict.classification == "init"
    assert verdict.suspects == ()
    assert any(e.kind == "rendezvous" for e in verdict.evidence)


def test_departed_names_the_earliest_failure_across_agents_not_each_root_cause():
    # huggingface/accelerate#1519: each agent's "Root Cause" is only what it saw first; rank 4
    # failed 51 s before ranks 0 and 3.
    def summary(rank: int, local: int, pid: int, at: str) -> str:
        return (
            "Root Cause (first observed failure):\n[0]:\n"
            f"  time      : 2023-06-03_{at}\n  host      : gpu187.cluster.local\n"
            f"  rank      : {rank} (local_rank: {local})\n  exitcode  : 1 (pid: {pid})\n"
            "  error_file: <N/A>\n"
        )

    evidence = logs_only({}, 8, T0)
    evidence.nodes[0].logs["/logs/agent0.log"] = summary(0, 0, 19414, "22:45:52")
    evidence.nodes[0].logs["/logs/agent1.log"] = summary(4, 0, 19401, "22:45:01")
    verdict = rules.departed(facts_of(evidence))
    assert verdict is not None and verdict.suspects == (4,)
    assert facts_of(evidence).missing == (0, 4)


# ------------------------------------------------------------------ DETAIL, peers, NCCL config

_DETAIL = (
    "[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {a} is "
    "running collective: CollectiveFingerPrint(SequenceNumber=485, OpType={op_a}), but Rank {b} "
    "is running collective: CollectiveFingerPrint(SequenceNumber=485, OpType={op_b}).\n"
)


def test_detail_mismatch_is_b_even_when_a_rank_then_exited():
    # speechbrain/speechbrain#2401's shape: ranks 1-3 report rank 0's BROADCAST against their
    # ALLREDUCE; rank 0 then exits with code 1 (the mismatch is why it exits).
    texts = {
        r: _DETAIL.format(r=r, a=r, op_a="ALLREDUCE", b=0, op_b="BROADCAST") for r in (1, 2, 3)
    }
    evidence = logs_only(texts, 4, T0)
    evidence.nodes[0].logs["/logs/torchrun.log"] = (
        "torch.distributed.elastic.multiprocessing.api:[ERROR] failed (exitcode: 1) "
        "local_rank: 0 (pid: 4242) of binary: /usr/bin/python3\n"
    )
    facts = facts_of(evidence)
    assert facts.missing == (0,)
    verdict = rules.detail_mismatch(facts)
    assert verdict is not None and verdict.classification == "B"
    assert verdict.suspects == (0,)
    assert rules.decide(facts).rule == "detail_mismatch"


def test_detail_mismatch_is_silent_on_watchdog_lines():
    texts = {r: _watchdog(r, 41, "ALLREDUCE", 1024) for r in range(4)}
    texts[3] = _watchdog(3, 41, "BROADCAST", 1024)
    facts = facts_of(logs_only(texts, 4, T0))
    assert rules.detail_mismatch(facts) is None
    assert rules.logs_different_collective(facts) is not None


def _nccl_node(host: str, address: str, rank: int, *lines: str) -> str:
    prefix = f"{host}:{1000 + rank}:{2000 + rank} [{rank % 8}] "
    boot = f"{prefix}NCCL INFO Bootstrap : Using eth0:{address}<0>\n"
    return boot + "".join(prefix + line + "\n" for line in lines)


def test_peer_named_blames_the_peer_not_the_rank_that_reports_it():
    # NVIDIA/nccl#795's WARN on host-a (rank 0) names 10.200.84.247, which NCCL's own
    # Bootstrap line on host-b (rank 1) says is that host's address.
    warn = "misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : "
    texts = {
        0: _nccl_node("host-a", "10.200.84.10", 0, warn + "Broken pipe"),
        1: _nccl_node("host-b", "10.200.84.247", 1, "NCCL INFO NCCL version 2.18.3+cuda12.2"),
    }
    evidence = logs_only(texts, 2, T0, nodes=2)
    verdict = rules.peer_named(facts_of(evidence))
    assert verdict is not None and verdict.classification == "A"
    assert verdict.suspects == (1,)
    assert verdict.suspect_nodes == ("node-1",)


def test_peer_named_follows_the_blame_to_the_rank_that_names_nobody():
    # A monitored barrier is coordinated by rank 0: when rank 0 gives up on the rank that
    # never came, the other ranks blame rank 0. Rank 0's own line (hiyouga/LlamaFactory#6000)
    # names rank 6; rank 2's (InternLM/xtuner#457, its title) names rank 0. Rank 0 is the
    # messenger, rank 6 the one to look at.
    texts = {
        0: "[rank0]: RuntimeError: [Rank 0]: Ranks 6 failed to pass monitoredBarrier in "
        "180000000000 ms\n",
        2: "[rank2]: RuntimeError: Rank 2 successfully reached monitoredBarrier, but received "
        "errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty "
        "rank.\n",
    }
    verdict = rules.peer_named(facts_of(logs_only(texts, 8, T0)))
    assert verdict is not None and verdict.classification == "A"
    assert verdict.suspects == (6,)


def test_peer_named_keeps_both_when_two_ranks_name_each_other():
    # Both ends of a broken connection report the other: nothing says which one failed.
    texts = {
        0: "[rank0]: RuntimeError: Rank 0 successfully reached monitoredBarrier, but received "
        "errors while waiting for send/recv from rank 1. Please check rank 1 logs for faulty "
        "rank.\n",
        1: "[rank1]: RuntimeError: Rank 1 successfully reached monitoredBarrier, but received "
        "errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty "
        "rank.\n",
    }
    verdict = rules.peer_named(facts_of(logs_only(texts, 2, T0)))
    assert verdict is not None and verdict.suspects == (0, 1)


def test_ras_names_a_gone_process_through_nccl_s_start_up_line_on_its_node():
    # NCCL's RAS documentation (troubleshooting/ras.html) on a crashed process: it names a pid
    # and a node, no rank. The process is gone, so no environ says its rank; the NCCL INFO
    # set-up line its log kept (NCCL's format, `host:pid:tid [dev] ... rank R nranks N`) does.
    ras = (
        "Errors\n======\n\nDEAD\n"
        "  1 job process is considered dead (unreachable via the RAS network)\n"
        "  Process 3487984 on node 172.16.64.213 managing GPU 5\n"
    )
    init = (
        "172.16.64.213:3487984:3488011 [5] NCCL INFO comm 0x55d1c0 rank 21 nranks 32 cudaDev 5 "
        "nvmlDev 5 busId b5000 commId 0x1f2e3d4c5b6a7988 - Init COMPLETE\n"
    )
    evidence = logs_only({}, 32, T0, nodes=2)
    evidence.nodes[0].ncclras = ras
    evidence.nodes[1].logs["/logs/train.log"] = init
    verdict = rules.ras_named(facts_of(evidence))
    assert verdict is not None and verdict.suspects == (21,)


def test_peer_named_is_silent_when_the_address_belongs_to_no_known_node():
    warn = "misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.9.9.9<58355> failed : "
    texts = {
        0: _nccl_node("host-a", "10.200.84.10", 0, warn + "Broken pipe"),
        1: _nccl_node("host-b", "10.200.84.247", 1, "NCCL INFO NCCL version 2.18.3+cuda12.2"),
    }
    assert rules.peer_named(facts_of(logs_only(texts, 2, T0, nodes=2))) is None


def _plugin(found: bool) -> str:
    if found:
        return "NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"
    return "NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."


def test_nccl_config_differs_names_the_odd_node():
    # NVIDIA/nccl#1634: one node without the net plugin among nodes that load it.
    texts = {r: _nccl_node(f"h{r}", f"10.0.0.{r + 1}", r, _plugin(r != 2)) for r in range(3)}
    verdict = rules.nccl_config_differs(facts_of(logs_only(texts, 3, T0, nodes=3)))
    assert verdict is not None and verdict.classification == "C"
    assert verdict.suspects == (2,) and verdict.suspect_nodes == ("node-2",)


def test_nccl_config_differs_names_no_one_on_a_tie():
    texts = {r: _nccl_node(f"h{r}", f"10.0.0.{r + 1}", r, _plugin(r == 0)) for r in range(2)}
    assert rules.nccl_config_differs(facts_of(logs_only(texts, 2, T0, nodes=2))) is None


def test_every_finding_on_the_samples_names_the_check_that_would_confirm_it():
    for name, look in [
        ("outside", None),
        ("crash", None),
        ("mismatch", None),
        ("init", None),
        ("tp-rank-stall", None),
        ("tp-mismatch", None),
        ("healthy", "snap1"),
        ("straggler", "snap1"),
    ]:
        facts = facts_of(load_snapshot(name, look) if look else load_snapshot(name))
        for found in rules.findings(facts):
            assert found.check, f"{name}: {found.rule} names no check"
