"""The rules over the line reader's signals (analysis/rules/failures.py), each where it speaks
and where it must stay silent, on lines quoted from public reports (the atlas's sources)."""

from __future__ import annotations

from analysis import rules
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.facts import build_facts
from analysis.snapshot_parse import parse_snapshot
from tests.analysis.synthetic import T0, Job


def facts_of(job: Job):
    return build_facts(parse_snapshot(job.evidence()))


# pytorch/pytorch#108264-style (CUDA OOM on one rank), NVIDIA/nccl#1409-style watchdog line.
GPU_OOM = (
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 "
    "has a total capacity of 79.11 GiB of which 1.02 GiB is free."
)
TIMEOUT = (
    "[rank{r}]:[E1201 08:59:{s:02d}.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
    "Timeout(ms)=600000) ran for 600011 milliseconds before timing out."
)


def _stuck_job() -> Job:
    return Job(age_s=900)


def test_failed_first_names_the_rank_with_a_cause_of_its_own_not_the_reporters():
    job = _stuck_job()
    job.ranks[6].log += GPU_OOM.format(r=6) + "\n"
    for rank in (0, 1, 2):
        job.ranks[rank].log += TIMEOUT.format(r=rank, s=10 + rank) + "\n"
    found = rules.failed_first(facts_of(job))
    assert found is not None and found.suspects == (6,)
    assert "CUDA out of memory" in found.summary


def test_failed_first_is_silent_when_every_failure_is_waiting():
    job = _stuck_job()
    for rank in (0, 1, 2):
        job.ranks[rank].log += TIMEOUT.format(r=rank, s=10 + rank) + "\n"
    assert rules.failed_first(facts_of(job)) is None


def test_gpu_fault_is_silent_without_an_xid_naming_a_rank():
    assert rules.gpu_fault(facts_of(_stuck_job())) is None


def test_process_state_is_silent_when_every_process_sleeps_normally():
    assert rules.process_state(facts_of(_stuck_job())) is None


def test_ras_named_speaks_on_a_ras_line_naming_a_rank_and_is_silent_without():
    job = _stuck_job()
    assert rules.ras_named(facts_of(job)) is None
    # NVIDIA/nccl RAS documentation's text client output for an unresponsive process.
    job.extra_logs[0] = [
        "Errors",
        "======",
        "",
        "INCOMPLETE",
        "  Missing communicator data from 1 job process",
        "  The missing process:",
        "    Process 4005 on node gpu-00 managing GPU 5",
    ]
    found = rules.ras_named(facts_of(job))
    assert found is not None and found.suspects == (5,)  # pid 4005 is rank 5's, by environ


def test_node_failure_names_the_node_a_scheduler_marks_failed():
    job = _stuck_job()
    # Slurm's own wording (ArjunaCluster/ArjunaUsers#48 style): srun on the surviving node.
    job.extra_logs[0] = ["srun: error: Node failure on gpu-07"]
    found = rules.node_failure(facts_of(job))
    assert found is not None and found.suspect_nodes == ("gpu-07",)


def test_node_failure_is_silent_without_a_node_marked():
    assert rules.node_failure(facts_of(_stuck_job())) is None


def test_peers_named_names_the_rank_a_desync_report_names():
    job = _stuck_job()
    job.ranks[0].log += (
        "[rank0]:[E1201 08:59:59.100000000 ProcessGroupNCCL.cpp:1395] [PG 0 Rank 0] Desync "
        "debugging report: [7] finished collective #11, but didn't join collective #12 (count "
        "from 1)\n"
    )
    found = rules.peers_named(facts_of(job))
    assert found is not None and found.suspects == (7,)


def test_peers_named_is_silent_when_no_line_names_another_rank():
    assert rules.peers_named(facts_of(_stuck_job())) is None


def test_checkpoint_save_is_silent_without_a_save():
    assert rules.checkpoint_save(facts_of(_stuck_job())) is None


def _stall(listing: list[str]) -> Job:
    # Horovod's stall inspector as horovodrun prefixes it (horovod/horovod#2576's layout).
    job = _stuck_job()
    job.ranks[0].log += (
        "[0]<stderr>:[2020-12-29 16:50:57.724380: W horovod/common/stall_inspector.cc:105] One "
        "or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
        "ranks and are waiting for remainder of ranks for more than 60 seconds.\n"
        "[0]<stderr>:Missing ranks:\n" + "".join(f"[0]<stderr>:{line}\n" for line in listing)
    )
    return job


def test_stalled_apart_calls_ranks_missing_different_collectives_b():
    job = _stall(["0: [broadcast.bool.sz]", "1: [allreduce.c_d1.bias, allreduce.c_d1.weight]"])
    found = rules.stalled_apart(facts_of(job))
    assert found is not None and found.classification == "B" and found.suspects == ()


def test_stalled_apart_is_silent_when_the_missing_ranks_lack_the_same_collective():
    job = _stall(["1: [allreduce.c_d1.bias]", "5: [allreduce.c_d1.bias]"])
    assert rules.stalled_apart(facts_of(job)) is None


# Horovod's coordinator printing to the launcher's stdout with no rank prefix
# (horovod/horovod#457, 128 nodes on TACC): the report still names the rank it lacks.
UNPREFIXED_MISSING = (
    "training/SGD/DistributedSGD_Allreduce/HorovodAllreduce_training_SGD_gradients_AddN_100_0 "
    "[missing ranks: 2]"
)


def test_peers_named_reads_a_stall_report_no_prefix_ties_to_a_rank():
    job = _stuck_job()
    job.extra_logs[0] = [UNPREFIXED_MISSING]
    found = rules.peers_named(facts_of(job))
    assert found is not None and found.suspects == (2,)


def test_a_rank_left_out_of_the_ready_ranks_is_the_rank_its_evidence_line_is_about():
    # horovod/horovod#334's report (a tqdm bar, then the warning run on): eight ranks, 0 and 6
    # never submitted the allreduces.
    job = _stuck_job()
    job.extra_logs[0] = [
        "Train Epoch     #73:  82% 1027/1252 [36:43<1:25:55, 22.91s/it, loss=0.946, accuracy=77]"
        "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by "
        "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This "
        "may indicate that different ranks are trying to submit different tensors or that only "
        "subset of ranks is submitting tensors, which will cause deadlock. Stalled ops: "
        "allreduce.conv1.weight [ready ranks: 5, 1, 4, 7, 2, 3], allreduce.bn1.weight [ready "
        "ranks: 5, 1, 4, 7, 2, 3]"
    ]
    found = rules.peers_named(facts_of(job))
    assert found is not None and found.suspects == (0, 6)
    assert {e.rank for e in found.evidence if e.kind == "desync"} == {0, 6}


def test_stalled_apart_reads_tensorflow_names_in_an_unprefixed_list():
    # The list as horovod/common/operations.cc writes it, TensorFlow tensor names (no op
    # prefix): each rank lacks a tensor the other submitted.
    job = _stuck_job()
    job.extra_logs[0] = [
        "Stalled ranks:",
        "0: [HorovodAllreduce_Const_9_0]",
        "3: [HorovodAllreduce_Const_8_0]",
    ]
    found = rules.stalled_apart(facts_of(job))
    assert found is not None and found.classification == "B" and found.suspects == ()


# Watchdog lines in PyTorch 2.x's format (XPixelGroup/BasicSR#737): a rank's own report of its
# last completed collective, set against another rank's stuck one.
def _watchdog(rank: int, seq: int, op: str, completed: int) -> str:
    return (
        f"[rank{rank}]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog "
        f"caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
        f"NumelIn=9801523, "
        f"NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
        f"[rank{rank}]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        f"0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by watchdog "
        f"at work: {seq}, last enqueued NCCL work: {seq + 3}, last completed NCCL work: "
        f"{completed}.\n"
    )


def test_completed_past_calls_b_when_a_rank_completed_what_another_waits_in():
    job = Job(nodes=1, per_node=2, age_s=900)
    # constructed from that format: rank 1 stuck at #808, rank 0 past it (completed #809)
    job.ranks[0].log += _watchdog(0, 810, "ALLREDUCE", 809)
    job.ranks[1].log += _watchdog(1, 808, "BROADCAST", 807)
    found = rules.completed_past(facts_of(job))
    assert found is not None and found.classification == "B" and found.suspects == ()


def test_completed_past_is_silent_when_every_rank_waits_where_the_others_stopped():
    # BasicSR#737 as published: every rank at #808, each last completed #807.
    job = Job(nodes=1, per_node=2, age_s=900)
    job.ranks[0].log += _watchdog(0, 808, "ALLREDUCE", 807)
    job.ranks[1].log += _watchdog(1, 808, "ALLREDUCE", 807)
    assert rules.completed_past(facts_of(job)) is None


# huggingface/accelerate#2246 (two Slurm nodes): NCCL's communicator set-up lines, as published.
INIT_START = (
    "qgpu2017:4305:4329 [1] NCCL INFO comm 0x52589c20 rank 7 nranks 8 cudaDev 1 nvmlDev 1 busId "
    "4b000 commId 0x26b3ece72ee71028 - Init START"
)


def _logs_only(lines: list[str]):
    # Only the job's console, as a bundle of logs alone would carry it.
    node = NodeEvidence(node="qgpu2017", hostname="qgpu2017")
    node.logs["/var/log/train/slurm.out"] = "\n".join(lines) + "\n"
    return build_facts(parse_snapshot(SnapshotEvidence(nodes=[node], collected_at=T0)))


def test_init_names_a_rank_whose_communicator_set_up_never_completed():
    found = rules.init(_logs_only([INIT_START]))
    assert found is not None and found.classification == "init" and found.suspects == ()
    assert any(e.kind == "comm_init" and e.rank == 7 for e in found.evidence)


def test_a_completed_communicator_set_up_is_no_start_up_hang():
    found = rules.init(_logs_only([INIT_START, INIT_START.replace("Init START", "Init COMPLETE")]))
    assert found is None or not any(e.kind == "comm_init" for e in found.evidence)
