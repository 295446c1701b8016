"""The line reader (analysis.signals): each reader on lines from several public sources.

Every line below is quoted as published (the thread after it), unless it says it is the lab's.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from analysis.signals import FAILURE_KINDS, SIGNAL_KINDS, LineSource, Signal, read_text


def _kinds(text: str, source: LineSource | None = None) -> dict[str, Signal]:
    found: dict[str, Signal] = {}
    for signal in read_text(text, source or LineSource()):
        found.setdefault(signal.kind, signal)
    return found


def _one(text: str, kind: str, source: LineSource | None = None) -> Signal:
    found = _kinds(text, source)
    assert kind in found, f"no {kind} in {sorted(found)} for {text[:120]!r}"
    return found[kind]


def test_every_kind_is_named_once_and_failures_exclude_progress():
    assert len(SIGNAL_KINDS) == len(set(SIGNAL_KINDS)) == 23
    assert "progress" not in FAILURE_KINDS and "ras_ok" not in FAILURE_KINDS
    assert "killed" in FAILURE_KINDS


# --- who wrote it --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        # PyTorch's [rankN]: prefix (pytorch/pytorch#152623)
        (
            "[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] [PG ID 0 PG GUID "
            "0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog "
            "at work: 315, last enqueued NCCL work: 315, last completed NCCL work: 314.",
            0,
        ),
        # srun --label (pytorch/pytorch#135486)
        ("0: Fatal Python error: Segmentation fault", 0),
        # Open MPI --tag-output (open-mpi/ompi#10734 style: [jobid,rank]<stream>:)
        ("[1,3]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered", 3),
        # Lightning's rank prefix inside a Ray worker's output (Nixtla/neuralforecast#1291)
        (
            "(_train_tune pid=22946) [rank: 1] Child process with PID 23026 terminated with "
            "code 1. Forcefully terminating all other processes to avoid zombies",
            1,
        ),
        # [PG .. Rank N] in the message (NVIDIA/nccl#1730)
        (
            "[E603 17:48:01.005538748 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID "
            "0(default_pg) Rank 118]  failure detected by watchdog at work sequence id: 2398459 "
            "PG status: last enqueued work: 2398578, last completed work: 2398458",
            118,
        ),
    ],
)
def test_it_ties_a_line_to_the_rank_its_prefix_names(line, rank):
    signals = read_text(line)
    assert signals, line
    assert {s.rank for s in signals} == {rank}


def test_a_torchrun_local_rank_goes_through_the_nodes_map_and_is_none_without_it():
    line = "[default3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert _one(line, "gpu_oom").rank == 3  # the line alone: local rank 3 read as the rank
    assert _one(line, "gpu_oom").local == 3
    mapped = LineSource(node="gpu-b", local_ranks={3: 11})
    assert _one(line, "gpu_oom", mapped).rank == 11
    assert _one(line, "gpu_oom", LineSource(single_node=False)).rank is None
    # a role other than torchrun's default one: [trainer3]:
    assert _one("[trainer3]:ValueError: bad shape", "exception", mapped).rank == 11


def test_an_nccl_host_pid_line_is_tied_to_its_rank_through_the_environment_or_nccl_init():
    # NCCL's prefix names host and pid, never a rank (NVIDIA/nccl#1267, NVIDIA/nccl#928)
    warn = (
        "node-2:5330:5400 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<59224> "
        "with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1"
    )
    by_environ = LineSource(node="node-2", pid_ranks={5330: 11})
    assert _one(warn, "connection", by_environ).rank == 11
    assert _one(warn, "link", by_environ).node == "node-2"
    init = (
        "node-2:5330:5330 [3] NCCL INFO comm 0x55f08a1c83d0 rank 3 nranks 8 cudaDev 3 nvmlDev "
        "3 busId 30 commId 0x438c8edb9fb0064f - Init COMPLETE"
    )
    # The communicator set-up line ties the pid to rank 3, wherever it stands in the file.
    assert _one(warn + "\n" + init, "connection").rank == 3
    assert _one(warn, "connection").rank is None
    assert _one(warn, "connection").pid == 5330


def test_a_sub_communicator_does_not_number_the_job_s_ranks():
    lines = "\n".join(
        [
            "h:7:7 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 busId 30 - Init COMPLETE",
            "h:9:9 [1] NCCL INFO comm 0x2 rank 5 nranks 8 cudaDev 1 busId 40 - Init COMPLETE",
            "h:7:7 [0] NCCL WARN Call to recv from 10.0.0.3<1234> failed : Connection reset",
            "h:9:9 [1] NCCL WARN Call to recv from 10.0.0.3<1234> failed : Connection reset",
        ]
    )
    ranks = [s.rank for s in read_text(lines) if s.kind == "connection"]
    assert ranks == [None, 5]


def test_a_pod_name_ties_a_file_to_its_pod_and_a_file_name_to_its_rank():
    line = "RuntimeError: NCCL communicator was aborted on rank 3."
    pod = _one(line, "exception", LineSource(path="logs/llama-worker-3.log"))
    assert pod.node == "llama-worker-3"
    folder = _one(line, "exception", LineSource(path="logs/llama-worker-3.log", node="gpu-a04"))
    assert folder.node == "gpu-a04"
    assert _one("ValueError: x", "exception", LineSource(path="logs/trace_rank_7.txt")).rank == 7
    attempt = LineSource(path="logs/tmp/torchelastic_x/none_y/attempt_0/2/stderr.log")
    assert _one("ValueError: x", "exception", attempt).local == 2


def test_a_failure_line_with_no_prefix_is_tied_to_whom_it_speaks_of():
    # The lab's own launcher line (lab/node.py), which was "could not be read".
    lab = _one(
        "2026-11-30 04:10:07 rank 3 (pid 6) exited with exitcode 137 (signal 9)",
        "killed",
        LineSource(path="logs/launcher.log", node="node-2"),
    )
    assert (lab.rank, lab.node, lab.code, lab.pid) == (3, "node-2", 137, 6)
    assert lab.at == datetime(2026, 11, 30, 4, 10, 7, tzinfo=UTC)
    # Open MPI (SPECFEM/specfem2d#1210)
    mpi = _one(
        "mpirun noticed that process rank 7 with PID 0 on node DESKTOP-G7NUGFV exited on "
        "signal 9 (Killed).",
        "killed",
    )
    assert (mpi.rank, mpi.node) == (7, "DESKTOP-G7NUGFV")
    # Ray's raylet: the worker's pid, placed through the environment (OpenRLHF/OpenRLHF#624)
    ray = _one(
        "(raylet) A worker died or was killed while executing a task by an unexpected system "
        "error. Worker IP address: 10.164.43.243 Worker port: 10004 Worker PID: 3943 Worker "
        "exit type: SYSTEM_ERROR. There are some potential root causes. (1) The process is "
        "killed by SIGKILL by OOM killer due to high memory usage.",
        "exit",
        LineSource(pid_ranks={3943: 5}, hosts={"10.164.43.243": "gpu-07"}),
    )
    assert (ray.rank, ray.node) == (5, "gpu-07")
    # Ray's guesses about the cause are not evidence of a SIGKILL
    assert "killed" not in _kinds(ray.text)


def test_srun_names_each_task_it_reports():
    # ComputationalRadiationPhysics/picongpu#198
    signals = read_text("srun: error: taurusi2031: tasks 10-11: Exited with exit code 1")
    assert [(s.kind, s.rank, s.node, s.code) for s in signals] == [
        ("exit", 10, "taurusi2031", 1),
        ("exit", 11, "taurusi2031", 1),
    ]


def test_indented_continuation_lines_belong_to_the_line_above():
    # torchrun's failure summary (foundation-model-stack/speculators, as in the samples)
    text = "  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 14692)\n  error_file: <N/A>\n"
    exit_ = _one(text, "exit")
    assert (exit_.rank, exit_.code, exit_.pid) == (3, 1, 14692)


# --- what it says -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind", "code"),
    [
        # torchrun (hpcaitech/ColossalAI, torch elastic's api.py wording)
        (
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
            "local_rank: 3 (pid: 812917) of binary: /usr/bin/python",
            "killed",
            -9,
        ),
        # DeepSpeed's launcher (deepspeedai/DeepSpeedExamples#626)
        (
            "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['python3', '-u', "
            "'trainCLM.py', '--local_rank=1'] exits with return code = -11",
            "segfault",
            -11,
        ),
        # Slurm (hafs-community/HAFS#101)
        ("srun: error: Orion-01-01: task 4: Out Of Memory", "oom", None),
        # the kernel's OOM killer (as dmesg prints it, tests/analysis/samples/public)
        (
            "[ 812.3] Out of memory: Killed process 4242 (python) total-vm:123kB",
            "oom",
            None,
        ),
        # NVRM Xid (NVIDIA/gpu-operator#1146)
        (
            "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable "
            "double bit error (DBE) has been detected on GPU in the framebuffer",
            "xid",
            48,
        ),
        # a shell's job report (ArjunaCluster/ArjunaUsers#52)
        (
            "/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed   python3 main.py",
            "killed",
            None,
        ),
        # the c10d store inside a launcher (pytorch/pytorch#153586 style DistStoreError)
        (
            "torch.distributed.DistStoreError: wait timeout after 600000ms, keys: "
            "/default_pg//0//cuda//0",
            "rendezvous",
            None,
        ),
        # torch elastic's rendezvous (meta-pytorch/torchx and pytorch docs wording)
        (
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
            "rendezvous",
            None,
        ),
        # NCCL's socket set-up, an internal error (NVIDIA/nccl#1612 style)
        (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "NCCLUtils.hpp:219, internal error - please report this issue to the NCCL "
            "developers, NCCL version 2.19.3",
            "init",
            None,
        ),
        ("node-1:77:77 [0] NCCL WARN Bootstrap : no socket interface found", "init", None),
        # mlx5 in the kernel log (a NIC link going down)
        ("mlx5_core 0000:3b:00.0 ens1f0: Link down", "link", None),
        # Kubernetes (kubectl describe node events)
        (
            "Warning  NodeNotReady  3m  node-controller  Node gpu-a04 status is now: NodeNotReady",
            "node_state",
            None,
        ),
        ("  Reason: Evicted  Message: The node was low on resource: memory.", "evicted", None),
        # checkpoints under way (Megatron-LM, HF Trainer)
        ("saving checkpoint at iteration     500 to /ckpt", "checkpoint", None),
        ("Saving model checkpoint to /out/checkpoint-500", "checkpoint", None),
        # NCCL configuration (NVIDIA/nccl#1814)
        (
            "hostname-test:984:984 [4] NCCL INFO NCCL_SOCKET_IFNAME set by environment to bond0",
            "nccl_config",
            None,
        ),
    ],
)
def test_it_reads_the_kind_of_failure_whatever_the_tool(line, kind, code):
    signal = _one(line, kind)
    assert signal.code == code


def test_a_completed_checkpoint_or_a_successful_rendezvous_is_no_signal():
    assert "checkpoint" not in _kinds("Saved checkpoint to /ckpt/step-500 (took 41.2 s)")
    assert "rendezvous" not in _kinds(
        "INFO:torch.distributed.elastic.agent.server.api:[] Rendezvous complete for workers."
    )
    assert _kinds("NCCL_IB_TIMEOUT set by environment to 22").keys() == {"nccl_config"}


def test_the_exception_is_the_line_that_says_what_happened():
    traceback = (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/app/train.py", line 41, in <module>\n'
        "[rank3]:     raise ValueError(f'bad batch {i}')\n"
        "[rank3]: ValueError: bad batch 17\n"
    )
    exceptions = [s for s in read_text(traceback) if s.kind == "exception"]
    assert [(s.rank, s.text) for s in exceptions] == [(3, "[rank3]: ValueError: bad batch 17")]
    # a Ray task error names the exception in parentheses (ray-project/ray issues)
    assert _one(
        "ray.exceptions.RayTaskError(RuntimeError): ray::TrainTrainable.train() (pid=123)",
        "exception",
    )
    assert "exception" not in _kinds("ERROR: something went wrong")


def test_an_exception_raised_inside_the_rendezvous_is_a_rendezvous_failure():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/'
        'dynamic_rendezvous.py", line 1108, in next_rendezvous\n'
        "    self._op_executor.run(join_op, deadline, self._get_deadline)\n"
        "RuntimeError: Socket Timeout\n"
    )
    assert {"exception", "timeout", "rendezvous"} <= _kinds(text).keys()


def test_desync_and_monitored_barrier_reports_name_the_peer():
    # pytorch/pytorch#152623
    lagging = _one(
        "             [7] finished collective #182, but didn't join collective #183 (count from 1)",
        "desync",
    )
    assert lagging.peer == 7
    # the monitored barrier (PyTorch docs)
    barrier = _one(
        "RuntimeError: Rank 1 failed to pass monitoredBarrier in 2000 ms",
        "timeout",
    )
    assert barrier.peer == 1


# --- progress ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "step"),
    [
        (" 10%|█         | 101/1000 [00:41<06:10,  2.43it/s]", 101),  # tqdm / HF Trainer
        ("Epoch 2:  45%|████▌     | 45/100 [00:10<00:12,  4.40it/s, v_num=0]", 45),  # Lightning
        (
            " [2024-01-01 12:00:00] iteration      100/  500000 | consumed samples: 1 | "
            "elapsed time per iteration (ms): 1234.5 | lm loss: 1.2",
            100,
        ),  # Megatron
        ("[Rank 0] step=100, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]", 100),  # DeepSpeed
        ("step:  10  loss:  9.8321  memory: 21.3GiB(22.4%)  tps: 5,104", 10),  # torchtitan
        ("Epoch: [0][511/1736]\t Loss 0.5117 MAE 0.6075 RMSE 0.7153", 511),  # torchvision style
        ("{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.3}", None),  # HF
    ],
)
def test_progress_is_any_counter_a_training_loop_prints(line, step):
    assert _one(line, "progress").step == step


def test_scheduler_steps_and_step_times_are_no_progress():
    assert "progress" not in _kinds(
        "slurmstepd: error: *** STEP 52222788.0 ON nid002888 CANCELLED AT 2026-04-29T23:36:37"
    )
    assert "progress" not in _kinds("max_steps=1000 warmup_steps=100 step_time=0.2s")


# --- times ------------------------------------------------------------------------------------


def test_a_glog_stamp_takes_the_year_of_the_collection():
    line = (
        "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        "0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog"
    )
    assert _one(line, "timeout").at is None  # no year, no collection time: no guess
    source = LineSource(collected_at=datetime(2025, 1, 2, tzinfo=UTC))
    assert _one(line, "timeout", source).at == datetime(2024, 6, 26, 6, 24, 44, 906457, UTC)


# --- bounds -----------------------------------------------------------------------------------


def test_each_kind_keeps_its_first_and_latest_signals():
    lines = "\n".join(f"[rank{i % 8}]: RuntimeError: boom {i}" for i in range(5000))
    signals = read_text(lines)
    exceptions = [s for s in signals if s.kind == "exception"]
    assert 32 < len(exceptions) <= 64
    assert exceptions[0].text.endswith("boom 0") and exceptions[-1].text.endswith("boom 4999")
    assert all(len(s.text) <= 1000 for s in read_text("ValueError: " + "x" * 100_000))


# --- the readers added for the atlas, on lines from other sources -----------------------------


def test_every_stem_a_reader_looks_for_contains_a_trigger_of_the_first_look():
    from analysis.signals import kinds

    stems = {stem for stems, _ in kinds.READERS for stem in stems}
    assert [s for s in stems if not kinds.may_say_anything(s)] == []
    assert not kinds.may_say_anything("2026-11-29 09:23:19,880 info [rank3] starting pid=193")


def test_a_guess_is_cut_from_the_message_and_every_guess_holds_the_word_tested_first():
    from analysis.signals import kinds

    assert all(kinds._GUESSED in guess for guess in kinds._GUESSES)
    said = "CUDA out of memory. Tried to allocate 2.00 GiB"
    assert kinds.classify(said) == [("gpu_oom", None, None)]
    assert kinds.classify(f"Worker died. Possible root cause: {said}") == [("exit", None, None)]


def test_slurm_states_and_lists_name_each_node():
    # sinfo (SchedMD's sinfo man page example rows)
    rows = read_text("debug*       up      30:00      2  down* adev[8-9]")
    assert {(s.kind, s.node) for s in rows} == {("node_state", "adev8"), ("node_state", "adev9")}
    # slurmstepd when the job ran out of time (desihub/desitarget#628, in the samples)
    limit = _one(
        "slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 "
        "DUE TO TIME LIMIT ***",
        "killed",
    )
    assert limit.node == "nid01934"


def test_scontrol_and_ibstat_blocks_say_whose_state_the_indented_lines_give():
    scontrol = (
        "NodeName=gpu-a04 Arch=x86_64 CoresPerSocket=32\n"
        "   State=DOWN+DRAIN ThreadsPerCore=2 TmpDisk=0 Weight=1\n"
        "   Reason=Not responding [slurm@2024-05-01T10:00:00]\n"
    )
    assert {(s.kind, s.node) for s in read_text(scontrol)} == {("node_state", "gpu-a04")}
    ibstat = (
        "CA 'mlx5_0'\n\tCA type: MT4123\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
    )
    assert "link" not in _kinds(ibstat)
    assert "link" in _kinds(ibstat.replace("State: Active", "State: Down"))


def test_a_wrapped_sentence_and_two_lines_run_together_are_read_as_printed():
    # Open MPI's notice, wrapped by the terminal after "on " (as in SPECFEM/specfem2d#1210)
    wrapped = read_text(
        "mpirun noticed that process rank 2 with PID 0 on node gpu7 exited on \n"
        "signal 9 (Killed).\n"
    )
    assert [(s.kind, s.rank, s.code) for s in wrapped] == [("killed", 2, 9)]
    # a tqdm bar and a DeepSpeed line on one line (huggingface/transformers#14531 form)
    both = read_text(
        " 10%|█         | 99/1000 [01:00<09:00,  1.66it/s][2024-01-01 00:00:00,000] [INFO] "
        "[logging.py:96:log_dist] [Rank 0] step=100, skipped=0, lr=[1e-05]"
    )
    assert [s.step for s in both if s.kind == "progress"] == [99, 100]


def test_ncclras_monitoring_events_name_a_dead_peer_in_text_and_json():
    source = LineSource(pid_ranks={77: 6}, hosts={"10.0.0.9": "gpu-9"})
    text = _one(
        "[2026-01-02 03:04:05] PEER_TIMEOUT_DEAD: Process 77 on node 10.0.0.9", "ras", source
    )
    assert (text.peer, text.node, text.rank) == (6, "gpu-9", None)
    events = read_text(
        '{"timestamp": "t", "group": "LIFECYCLE", "event": "PEER_NEW", "peer": {"host": "h"}}\n'
        '{"timestamp": "t", "group": "LIFECYCLE", "event": "PEER_UNRESPONSIVE",'
        ' "peer": {"host": "10.0.0.9", "pid": 77}, "details": ""}\n',
        source,
    )
    assert [(s.kind, s.peer) for s in events] == [("ras", 6)]  # PEER_NEW is no trouble


def test_horovod_s_missing_ranks_and_hydra_s_exit_code():
    # Horovod's stall inspector under mpirun --tag-output (horovod/horovod stall reports)
    stall = read_text("[1,0]<stderr>:Missing ranks:\n[1,0]<stderr>:3: [allreduce.fc1.weight]\n")
    assert [(s.kind, s.rank, s.peer) for s in stall] == [("desync", 0, 3)]
    # Horovod 0.19's heading for the same list, unprefixed, as horovod/common/operations.cc
    # writes it (`<rank>!` for a rank already shut down): `2: [` is the list, not srun's label.
    old = read_text(
        "Stalled ranks:\n2: [HorovodAllreduce_Const_9_0]\n5!: [HorovodAllreduce_Const_9_0]\n"
    )
    assert [(s.kind, s.rank, s.peer) for s in old] == [("desync", None, 2), ("desync", None, 5)]
    hydra = read_text(
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 4242 RUNNING AT node-3\n"
        "=   EXIT CODE: 11\n"
    )
    assert ("segfault", 11) in {(s.kind, s.code) for s in hydra}


def test_nccl_unwinding_in_the_data_path_is_no_init_failure():
    # NVIDIA/nccl-tests#252: an IB completion error on kolyoz2, then NCCL unwinding it through
    # transport/net.cc and proxy.cc in its proxy's progress thread: the communicator was up and
    # moving data, so none of it says set-up failed.
    text = (
        "kolyoz2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer "
        "10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)\n"
        "kolyoz2:25146:25854 [0] NCCL INFO transport/net.cc:1137 -> 6\n"
        "kolyoz2:25146:25854 [0] NCCL INFO proxy.cc:698 -> 6\n"
        "kolyoz2:25146:25854 [0] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n"
    )
    kinds = {s.kind for s in read_text(text, LineSource(path="logs/nccl.log", node="kolyoz2"))}
    assert "init" not in kinds
    assert "connection" in kinds


def test_nccl_unwinding_through_set_up_is_still_an_init_failure():
    # NVIDIA/nccl-tests#166: a socket connect failing while the communicator is set up, then
    # NCCL unwinding it through init.cc in the same thread.
    text = (
        "ubuntu:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed "
        "by remote peer node1<57557>\n"
        "ubuntu:39964:40044 [0] NCCL INFO transport/net.cc:288 -> 3\n"
        "ubuntu:39964:40044 [0] NCCL INFO init.cc:1089 -> 3\n"
    )
    kinds = {s.kind for s in read_text(text, LineSource(path="logs/nccl.log", node="ubuntu"))}
    assert "init" in kinds


# A tqdm bar a terminal's carriage return ran into the next log line (hiyouga/LlamaFactory#8261,
# pytorch/pytorch#118369): the bar is progress, and the stamp of the line it runs into is its time.
BAR_INTO_WATCHDOG = (
    "  1%|▏         | 24/1752 [01:08<1:22:56,  2.88s/it][rank5]:[E602 11:17:52.185053341 "
    "ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=5389, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
    "for 600003 milliseconds before timing out."
)
LIGHTNING_BAR_INTO_WATCHDOG = (
    "Epoch 0:   6%|██                               | 32040/500150 [6:28:43<94:39:17,  "
    "1.37it/s, loss=2.6, v_num=95nc, reduced_train_loss=2.590, global_step=3.2e+4, "
    "consumed_samples=2.56e+7][E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
    "25624887 milliseconds before timing out."
)


def test_a_bar_run_into_a_stamped_line_takes_that_line_s_time_and_gives_its_pace():
    from analysis.signals.progress import bar_end, bar_step_time

    source = LineSource(collected_at=datetime(2025, 6, 2, 12, 0, tzinfo=UTC))
    bar = next(s for s in read_text(BAR_INTO_WATCHDOG, source) if s.kind == "progress")
    assert (bar.step, bar.at) == (24, datetime(2025, 6, 2, 11, 17, 52, 185053, tzinfo=UTC))
    assert bar_step_time(BAR_INTO_WATCHDOG) == 2.88
    assert round(bar_step_time(LIGHTNING_BAR_INTO_WATCHDOG), 3) == round(1 / 1.37, 3)
    end = bar_end(LIGHTNING_BAR_INTO_WATCHDOG)
    assert LIGHTNING_BAR_INTO_WATCHDOG[end:].startswith("[E ProcessGroupNCCL.cpp:458]")
    assert bar_end("  1%|▏         | 24/1752 [01:08<1:22:56,  2.88s/it]") is None  # bar alone


def test_a_warn_from_nccl_s_set_up_code_is_an_init_failure_whatever_it_says():
    # horovod/horovod#3929 (mpirun --tag-output): the WARN alone, without the `-> 5` unwinding.
    line = (
        "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected "
        ": rank 2 and rank 0 both on CUDA device 1000\n"
    )
    assert "init" in {s.kind for s in read_text(line)}
    # A WARN from the transport code mid-run is a link problem, not set-up (constructed in
    # NCCL's format for an IB completion error).
    ib = (
        "gpu-a04:1243335:1244249 [6] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
        "from peer 10.148.54.241<56130> with error 12, opcode 0, len 0, vendor err 129\n"
    )
    assert "init" not in {s.kind for s in read_text(ib)}
