"""The failure scenarios: who fails, when, and what the console should conclude."""

from __future__ import annotations

from dataclasses import dataclass

from lab.rank_common import DP_DESC, GROUP_SCENARIOS, TP_DESC, parallel_groups

DRIFT_VAR = "NCCL_SOCKET_IFNAME"
DRIFT_VALUE = "eth1"
CLUSTER_IFNAME = "lo"


@dataclass(frozen=True)
class Scenario:
    name: str
    classification: str  # A, B, C, straggler, init, healthy
    summary: str
    hangs: bool = True


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("healthy", "healthy", "All ranks keep stepping.", hangs=False),
        Scenario(
            "rank-exit",
            "A",
            "One rank was SIGKILLed (exit code 137) at the fault step; every other rank waits "
            "in the gradient all_reduce. Look at the dead rank's log tail and the launcher log.",
        ),
        Scenario(
            "oom",
            "A",
            "One rank was killed by the kernel OOM killer (memory cgroup); the others wait in "
            "all_reduce. The node's dmesg has the 'Memory cgroup out of memory: Killed process' "
            "line.",
        ),
        Scenario(
            "dataloader-stall",
            "A",
            "One rank is alive but blocked on the CPU side (a shard read in load_batch); the "
            "others wait in all_reduce (CPU-side stall, a flavour of A).",
        ),
        Scenario(
            "collective-mismatch",
            "B",
            "One rank called an extra barrier (rank-conditional code) while the others are in "
            "all_reduce: different collectives at the same sequence number in the flight "
            "recorder.",
        ),
        Scenario(
            "env-drift",
            "C",
            f"All ranks are alive and in the same all_reduce; one node's ~/.bashrc exports "
            f"{DRIFT_VAR}={DRIFT_VALUE} (the others use {CLUSTER_IFNAME}), so its ranks' "
            f"environment differs.",
        ),
        Scenario(
            "straggler",
            "straggler",
            "The job progresses, but one rank spends several times longer per step in data "
            "loading; the others spend that time waiting in all_reduce.",
            hangs=False,
        ),
        Scenario(
            "init-hang",
            "init",
            "The ranks of one node use a wrong MASTER_PORT and never reach the store; all "
            "ranks sit in init_process_group and no step is ever completed.",
        ),
        Scenario(
            "tp-rank-stall",
            "A",
            "Data + tensor parallel job. One rank deadlocks on a Python lock (outside any "
            "collective) before its tensor-parallel all_reduce; its tensor-parallel peer waits "
            "in that group's all_reduce, the other node's ranks finished theirs and wait in the "
            "data-parallel all_reduce for the stuck node. The waiting ranks are victims.",
        ),
        Scenario(
            "tp-mismatch",
            "B",
            "Data + tensor parallel job. In one tensor-parallel group one rank calls all_gather "
            "(sequence parallel switched on for it alone) where its peer calls all_reduce: the "
            "same sequence number in that group, different ops. The other node's ranks wait in "
            "the data-parallel all_reduce.",
        ),
        Scenario(
            "tp-rank-exit",
            "A",
            "Data + tensor parallel job. One rank was SIGKILLed (exit code 137) before its "
            "tensor-parallel all_reduce; its tensor-parallel peer waits in that group's "
            "all_reduce, the other node's ranks wait in the data-parallel all_reduce for the "
            "stuck node. Only the dead rank is missing; the waiting ranks are victims.",
        ),
    ]
}


def fault_rank(name: str, nodes: int, ranks_per_node: int) -> int:
    """The rank that misbehaves by default: never rank 0 (rank 0 is usually the fine one)."""
    world = nodes * ranks_per_node
    if name in ("dataloader-stall", "straggler"):
        return 1 if world > 1 else 0
    if name in ("healthy", "env-drift", "init-hang"):
        return -1
    return world - 1


def fault_node(name: str, nodes: int) -> int:
    """The node whose environment is wrong (env-drift, init-hang): the last one."""
    return nodes - 1 if name in ("env-drift", "init-hang") else -1


def expected(
    name: str, nodes: int, ranks_per_node: int, fault_step: int, node_names: list[str]
) -> dict:
    """What the console should conclude about a lab running this scenario."""
    sc = SCENARIOS[name]
    world = nodes * ranks_per_node
    rank = fault_rank(name, nodes, ranks_per_node)
    node = fault_node(name, nodes)
    suspects: list[int] = []
    suspect_node = ""
    if rank >= 0:
        suspects = [rank]
        suspect_node = node_names[rank // ranks_per_node]
    if node >= 0:
        suspects = list(range(node * ranks_per_node, (node + 1) * ranks_per_node))
        suspect_node = node_names[node]
    out: dict = {
        "classification": sc.classification,
        "summary": sc.summary,
        "hangs": sc.hangs,
        "world_size": world,
        "suspect_ranks": suspects if name != "healthy" else [],
        "suspect_node": suspect_node,
        "missing_ranks": [rank] if name in ("rank-exit", "oom", "tp-rank-exit") else [],
        "fault_step": fault_step if name != "healthy" else None,
        # Every rank completed fault_step - 1; the step of the fault never completes.
        "last_global_step": fault_step - 1 if sc.hangs and name != "init-hang" else None,
    }
    if name in ("rank-exit", "tp-rank-exit"):
        out["exit_code"] = 137
    if name == "oom":
        out["exit_code"] = 137
        out["dmesg"] = "Memory cgroup out of memory: Killed process"
    if name == "init-hang":
        out["last_global_step"] = None  # no step was ever completed
        out["stuck_in"] = "init_process_group"
    if name == "env-drift":
        out["env_diff"] = {DRIFT_VAR: {"expected": CLUSTER_IFNAME, "drifted": DRIFT_VALUE}}
    if name == "collective-mismatch":
        out["collectives"] = {"suspect": "gloo:barrier", "others": "gloo:all_reduce"}
    if name in ("rank-exit", "oom", "dataloader-stall", "env-drift", "collective-mismatch"):
        out["others_in"] = "all_reduce"
    # The function the suspect rank's main thread is in (py-spy), where it is alive.
    suspect_in = {
        "dataloader-stall": "_read_shard",
        "collective-mismatch": "barrier",
        "straggler": "load_batch",
        "env-drift": "all_reduce",
        "init-hang": "init_process_group",
        "tp-rank-stall": "flush_activation_stats",
        "tp-mismatch": "all_gather",
    }
    if name in suspect_in:
        out["suspect_in"] = suspect_in[name]
    if name in GROUP_SCENARIOS:
        out.update(group_expectation(name, world, ranks_per_node, fault_step, rank))
    return out


def group_expectation(name: str, world: int, tp_size: int, fault_step: int, rank: int) -> dict:
    """Where each rank of a data + tensor parallel scenario waits, group by group.

    The faulty rank's tensor-parallel group is where the sequence stops (at that group's
    collective of the fault step: one tp all_reduce per step, so its seq is fault_step); its
    tp peers wait there, and every rank outside that group finished its tp all_reduce and
    waits in the data-parallel all_reduce (seq fault_step of its dp group) for the stuck ranks.
    """
    layout = parallel_groups(world, tp_size)
    stuck = next(g for g in layout["tp"] if rank in g)
    out: dict = {
        "groups": layout,
        "group_desc": {"dp": DP_DESC, "tp": TP_DESC},
        "stuck_group": {"kind": "tp", "ranks": stuck, "seq": fault_step},
        "waiting_in": {
            "tp": [r for r in stuck if r != rank],
            "dp": [r for r in range(world) if r not in stuck],
        },
        "others_in": "all_reduce",
    }
    if name == "tp-mismatch":
        out["collectives"] = {"suspect": "gloo:all_gather", "others": "gloo:all_reduce"}
    return out
