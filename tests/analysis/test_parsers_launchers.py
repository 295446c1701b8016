"""Launchers' and frameworks' own failure lines, on lines quoted from public reports.

Each sample under samples/public/launchers/ starts with `# source: URL`. Lines built here instead
of read from a sample say which source file's format string they follow.
"""

import re

import pytest

from analysis.parsers import launchers
from analysis.parsers.launchers import (
    LauncherReader,
    deepspeed_exit,
    lightning_exit,
    megatron_exit,
    mpirun_exit,
    python_exit,
    ray_exit,
    shell_exit,
    slurm_exits,
    slurm_step_exit,
    spawn_exit,
    task_ids,
    torchrun_exit,
)
from analysis.parsers.logs import ExitFact, parse_log
from tests.analysis.sample_evidence import SAMPLES

LAUNCHERS = SAMPLES / "public" / "launchers"


def sample(name: str) -> str:
    text = (LAUNCHERS / name).read_text()
    assert text.startswith("# source: https://")
    return text


def sample_lines(name: str) -> list[str]:
    return [line for line in sample(name).splitlines()[1:] if line.strip()]


def exits(name: str, path: str = "launcher.log") -> list[ExitFact]:
    return parse_log(path, sample(name)).exits


# -- torchrun -----------------------------------------------------------------------------------


def test_it_reads_torchrun_failed_line_and_the_sigterms_it_sent():
    facts = exits("torchrun_failed_colossalai.log")
    failed = [f for f in facts if not f.stopped_by_launcher]
    assert [(f.local_rank, f.pid, f.exit_code, f.launcher) for f in failed] == [
        (3, 812917, -9, "torchrun")
    ]
    stopped = [f for f in facts if f.stopped_by_launcher]
    assert [(f.pid, f.exit_code) for f in stopped] == [(812914, -15), (812915, -15), (812916, -15)]


def test_it_reads_the_glog_style_torchrun_lines():
    facts = exits("torchrun_failed_megatron.log")
    assert [(f.pid, f.exit_code, f.stopped_by_launcher) for f in facts] == [
        (3304210, -15, True),
        (3304209, -11, False),
    ]
    assert facts[1].local_rank == 0


def test_it_reads_the_newer_closing_wording():
    fact = torchrun_exit(sample_lines("torchrun_closing_nvrx.log")[0])
    assert fact is not None
    assert (fact.pid, fact.exit_code, fact.stopped_by_launcher) == (293866, -15, True)


def test_it_reads_a_torchrun_summary_with_one_sigkill():
    facts = exits("torchrun_summary_cppo.log")
    assert len(facts) == 1
    fact = facts[0]
    assert (fact.rank, fact.local_rank, fact.pid, fact.exit_code) == (0, 0, 14750, -9)
    assert fact.first_observed and not fact.stopped_by_launcher
    assert fact.host == "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"
    assert fact.at is not None and (fact.at.hour, fact.at.minute) == (15, 43)


def test_it_marks_only_the_root_cause_entry_as_first_observed():
    log = parse_log("torchrun.log", sample("torchrun_summary_speculators.log"))
    by_rank = {f.rank: f for f in log.exits}
    assert sorted(by_rank) == [0, 1, 2, 3]
    assert [r for r, f in by_rank.items() if f.first_observed] == [1]
    assert (by_rank[3].exit_code, by_rank[0].exit_code, by_rank[2].exit_code) == (1, -9, -15)
    # The quote stops after the root cause's rank line: its exit code is unknown, not invented.
    assert by_rank[1].exit_code is None
    # Rank 3 failed on its own; rank 2 is one torchrun stopped with SIGTERM.
    assert by_rank[2].stopped_by_launcher and not by_rank[3].stopped_by_launcher
    assert log.local_to_global == {3: 3, 0: 0, 2: 2, 1: 1}
    assert log.pid_ranks == {14692: 3, 14689: 0, 14691: 2}


def test_it_finds_the_captured_crash_root_cause_among_four_failures():
    log = parse_log("torchrun.log", (SAMPLES / "crash" / "torchrun.log").read_text())
    summary = [f for f in log.exits if f.host is not None]
    assert len(summary) == 4
    root = [f for f in summary if f.first_observed]
    assert [(f.rank, f.exit_code) for f in root] == [(2, -6)]
    assert all(f.stopped_by_launcher for f in summary if f.exit_code == -15)
    # torchrun's own "failed" line names the same process; the summary gives it its rank.
    failed = [f for f in log.exits if "failed (exitcode" in f.line]
    assert [(f.rank, f.local_rank, f.exit_code) for f in failed] == [(2, 2, -6)]


def test_it_pairs_local_and_global_ranks_from_the_rendezvous_result():
    log = parse_log("agent.log", sample("torchrun_rendezvous_torchx.log"))
    assert log.local_to_global == {0: 0}
    # The format of torch/distributed/elastic/agent/server/api.py, second node of two.
    block = "\n".join(
        [
            "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete "
            "for workers. Result:",
            "  restart_count=0",
            "  group_rank=1",
            "  local_ranks=[0, 1, 2, 3]",
            "  role_ranks=[4, 5, 6, 7]",
            "  global_ranks=[4, 5, 6, 7]",
            "  role_world_sizes=[8, 8, 8, 8]",
            "  global_world_sizes=[8, 8, 8, 8]",
            "[default1]:step 3 done",
        ]
    )
    log = parse_log("agent.log", block)
    assert log.local_to_global == {0: 4, 1: 5, 2: 6, 3: 7}
    assert log.steps[-1].local_rank == 1


def test_it_drops_a_local_rank_two_nodes_map_differently():
    first = "[default] Rendezvous complete for workers. Result:\n  local_ranks=[0, 1]\n"
    first += "  global_ranks=[0, 1]\n  global_world_sizes=[4, 4]\n"
    second = first.replace("global_ranks=[0, 1]", "global_ranks=[2, 3]")
    assert parse_log("merged.log", first + second).local_to_global == {}
    assert parse_log("one.log", first + first).local_to_global == {0: 0, 1: 1}


# -- DeepSpeed ----------------------------------------------------------------------------------


def test_it_reads_deepspeed_return_code_of_its_only_process():
    log = parse_log("ds.log", sample("deepspeed_exit_single.log"))
    codes = [f for f in log.exits if f.exit_code is not None]
    assert [(f.exit_code, f.launcher) for f in codes] == [(-9, "deepspeed")]
    # One "Killing subprocess" line before it: the handler had one process, local rank 0.
    assert codes[0].local_rank == 0
    assert [(f.pid, f.local_rank) for f in log.exits if f.exit_code is None] == [(13266, 0)]


def test_it_does_not_blame_the_last_spawned_deepspeed_process():
    facts = exits("deepspeed_exit_two_procs.log")
    code = [f for f in facts if f.exit_code is not None]
    # The command printed is the last one spawned (--local_rank=1), whichever process failed.
    assert [(f.exit_code, f.local_rank) for f in code] == [(-11, None)]
    killed = [f for f in facts if f.exit_code is None]
    assert [(f.pid, f.local_rank) for f in killed] == [(94984, 0), (94985, 1)]
    assert not any(f.stopped_by_launcher for f in killed)  # the failed one is among them


def test_it_trusts_deepspeed_local_rank_when_the_node_ran_one_process():
    line = sample_lines("deepspeed_exit_single.log")[1]
    fact = deepspeed_exit(line, num_local_procs=1)
    assert fact is not None and (fact.local_rank, fact.exit_code) == (0, -9)


def test_it_maps_hosts_to_ranks_from_deepspeed_global_rank_mapping_not_gpu_ids():
    log = parse_log("ds.log", sample("deepspeed_world_info.log"))
    assert log.host_ranks == {"localhost": [0, 1]}  # WORLD INFO DICT lists GPUs 0 and 3
    assert log.local_to_global == {0: 0, 1: 1}


def test_it_maps_the_second_deepspeed_node_to_its_own_ranks():
    # The format of deepspeed/launcher/launch.py, as node 1 of two logs it.
    text = "\n".join(
        [
            "[INFO] [launch.py:151:main] nnodes=2, num_local_procs=2, node_rank=1",
            "[INFO] [launch.py:162:main] global_rank_mapping=defaultdict(<class 'list'>, "
            "{'worker-0': [0, 1], 'worker-1': [2, 3]})",
            "[INFO] [launch.py:253:main] process 4242 spawned with command: "
            "['/usr/bin/python', '-u', 'train.py', '--local_rank=1']",
        ]
    )
    log = parse_log("worker-1.log", text)
    assert log.host_ranks == {"worker-0": [0, 1], "worker-1": [2, 3]}
    assert log.local_to_global == {0: 2, 1: 3}
    assert log.pid_ranks == {4242: 3}


# -- Ray Train ----------------------------------------------------------------------------------


def test_it_maps_ray_train_workers_to_hosts_and_pids():
    log = parse_log("driver.log", sample("ray_train_workers.log"))
    assert log.host_ranks["10.114.131.76"] == list(range(8))
    assert log.host_ranks["10.114.141.217"] == [8]
    assert log.pid_ranks[16733] == 4
    # pid 429 is reused on two nodes: the later worker wins the pid; local rank 0 is on five
    # nodes, so it maps to no single global rank.
    assert 0 not in log.local_to_global
    assert log.local_to_global[7] == 7


def test_it_reads_the_raylet_worker_death_with_its_pid_and_address():
    facts = exits("ray_worker_died.log")
    assert [(f.pid, f.host, f.exit_code, f.launcher) for f in facts] == [
        (3943, "10.164.43.243", None, "ray")
    ]


def test_it_reads_ray_train_failed_workers_by_rank():
    # ray/train/_internal/utils.py: logger.info(f"Worker {failed_actor_rank} has failed.")
    fact = ray_exit("2024-06-07 10:00:00,000\tINFO utils.py:49 -- Worker 3 has failed.")
    assert fact is not None and (fact.rank, fact.exit_code) == (3, None)
    # ray/train/v2/_internal/execution/worker_group/poll.py: f"[Rank {ranks}]:\n{error}"
    log = parse_log(
        "driver.log",
        "ray.train.WorkerGroupError: Training failed due to worker errors:\n"
        "[Rank 0, 2]:\nRuntimeError: boom\n",
    )
    assert [(f.rank, f.launcher) for f in log.exits] == [(0, "ray"), (2, "ray")]


# -- Slurm --------------------------------------------------------------------------------------


def test_it_reads_srun_task_states_with_host_and_code():
    facts = exits("slurm_oom_cancelled.log")
    by_line = {(f.rank, f.host, f.exit_code) for f in facts}
    assert (4, "Orion-01-01", -9) in by_line  # Out Of Memory: the cgroup OOM killer
    assert (289, "Orion-18-69", -7) in by_line  # Bus error
    cancelled = [f for f in facts if "CANCELLED" in f.line]
    assert [(f.host, f.stopped_by_launcher) for f in cancelled] == [("orion-01-01", True)]
    oom = [f for f in facts if "oom-kill" in f.line]
    assert [(f.rank, f.exit_code) for f in oom] == [(None, -9)]


def test_it_expands_srun_task_ranges_and_marks_a_cancelled_steps_tasks_stopped():
    facts = [f for f in exits("slurm_time_limit.log") if f.rank is not None]
    assert sorted(f.rank for f in facts) == list(range(16))
    assert all(f.exit_code == -15 and f.stopped_by_launcher for f in facts)
    assert {f.host for f in facts if f.rank >= 8} == {"nid01935"}


def test_it_leaves_out_the_task_whose_failure_cancelled_the_step():
    facts = [f for f in exits("slurm_task_failure.log") if f.rank is not None]
    assert 58 not in {f.rank for f in facts} and len(facts) == 63


def test_it_reads_srun_killed_and_exit_code_lines():
    killed = exits("slurm_killed.log")
    assert [(f.rank, f.host, f.exit_code) for f in killed] == [
        (11, "node25", -9),
        (19, "node25", -9),
        (9, "node25", -9),
    ]
    assert not any(f.stopped_by_launcher for f in killed)
    exited = exits("slurm_exit_code.log")
    assert [(f.rank, f.exit_code) for f in exited] == [(10, 1), (11, 1)]


def test_it_reads_a_batch_scripts_killed_job_and_the_oom_event():
    facts = exits("slurm_batch_oom_shell.log")
    assert [(f.pid, f.exit_code, f.launcher) for f in facts] == [
        (8156, 137, "shell"),
        (None, -9, "slurm"),
        (None, 137, "shell"),
    ]


def test_slurm_task_ids_are_bounded():
    assert task_ids("0-57,59-63") == [*range(58), *range(59, 64)]
    assert len(task_ids("0-99999999")) == launchers.MAX_MAP
    assert task_ids("3-x,5") == [5]


# -- mpirun, spawn, Lightning, Megatron, Python -------------------------------------------------


def test_it_reads_mpirun_signal_and_exit_code_reports():
    facts = exits("mpirun_signal.log")
    assert [(f.rank, f.pid, f.host, f.exit_code) for f in facts] == [
        (7, None, "DESKTOP-G7NUGFV", -9)
    ]
    facts = exits("mpirun_exit_code.log")
    assert [(f.rank, f.exit_code, f.launcher) for f in facts] == [(2, 1, "mpirun")]


def test_it_reads_torch_spawn_lines():
    facts = exits("spawn_terminating.log")
    assert [(f.pid, f.exit_code, f.stopped_by_launcher) for f in facts] == [
        (11979, -15, True),
        (11980, -15, True),
    ]
    # torch/multiprocessing/spawn.py: f"process {error_index} terminated with signal {name}"
    fact = spawn_exit(
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated "
        "with signal SIGKILL"
    )
    assert fact is not None and (fact.local_rank, fact.exit_code) == (1, -9)


def test_it_reads_lightnings_child_process_line_as_a_local_rank():
    facts = exits("lightning_child.log")
    assert [(f.local_rank, f.pid, f.exit_code, f.launcher) for f in facts] == [
        (1, 23026, 1, "lightning")
    ]
    # Lightning then SIGKILLs the main process: the shell's "Killed" is that, not a new failure.
    log = parse_log("run.log", sample("lightning_child.log") + "Killed\n")
    assert [f.stopped_by_launcher for f in log.exits] == [False, True]


def test_it_reads_megatrons_nan_check_rank():
    facts = exits("megatron_nan.log")
    assert [(f.rank, f.exit_code, f.launcher) for f in facts] == [(13, None, "megatron")]
    # megatron/core/rerun_state_machine.py, validate_result with reruns disabled:
    fact = megatron_exit(
        "RuntimeError: Rank 5, node gpu-07, device 1, iteration 859: Unexpected result nan "
        "(message='found NaN in local grad norm for bucket #0 in backward pass before "
        "data-parallel communication collective')"
    )
    assert fact is not None and (fact.rank, fact.host) == (5, "gpu-07")


def test_it_reads_python_fatal_errors_with_the_reporters_rank():
    log = parse_log("/logs/rank6.log", sample("python_segfault.log"))
    assert [(f.rank, f.exit_code, f.launcher) for f in log.exits] == [(6, -11, "python")]
    labelled = exits("python_segfault_srun_label.log")
    assert [(f.exit_code, f.launcher) for f in labelled] == [(-11, "python"), (-11, "torchrun")]
    # CPython Modules/faulthandler.c names the signal: "Fatal Python error: Aborted"
    fact = python_exit("Fatal Python error: Aborted", rank=2)
    assert fact is not None and (fact.rank, fact.exit_code) == (2, -6)


def test_it_takes_the_rank_of_a_terminate_from_its_what_line():
    log = parse_log("train.log", sample("python_terminate.log"))
    assert [(f.rank, f.exit_code, f.launcher) for f in log.exits] == [(7, -6, "python")]
    assert any("terminate called" in e.line for e in log.errors)


# -- lines that must give nothing ---------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Killed 3 stale checkpoints",
        "step 5 done, nothing Killed",
        "srun: error: Unable to allocate resources: Requested time limit is invalid",
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "Worker 3 has failed to report metrics in time",
        "failed (exitcode: unknown) local_rank: 0",
        "Sending process 12 closing signal",
        "[INFO] [launch.py:351:main] Process 1234 exits successfully.",
        "mpirun noticed that the job aborted, but has no info as to the process that caused",
        "Fatal Python error: init_fs_encoding: failed to get the Python codec",
        "[rank: 1] Child process with PID 12 terminated",
        "Rank 3: loss is 0.5",
        "  what():  std::bad_alloc",
        "WORLD INFO DICT: {'localhost': [0, 3]}",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    ],
)
def test_near_misses_give_no_exit(line):
    assert parse_log("x.log", line).exits == []


def test_single_line_readers_ignore_unrelated_lines():
    line = "2026-11-29 09:26:44,000 INFO [rank3] host=h step=4 loss=0.1 step_time=0.2s"
    readers = (torchrun_exit, deepspeed_exit, ray_exit, slurm_step_exit, mpirun_exit)
    readers += (spawn_exit, lightning_exit, megatron_exit, python_exit, shell_exit)
    assert all(reader(line) is None for reader in readers)
    assert slurm_exits(line) == []


# -- hostile input ------------------------------------------------------------------------------

# Each prefix reaches one expression with a 1 MB tail built to make a backtracking engine try
# every split. The expressions are linear by construction (see the module docstring); these
# tests only prove they return and stay correct. Timings are measured by hand, not asserted.
HOSTILE = 1_000_000
HOSTILE_LINES = [
    "failed (exitcode: -" + "9" * HOSTILE,
    "Sending process " + "1" * HOSTILE + " closing signal SIG",
    "Closing process " + "1 " * (HOSTILE // 2),
    "Received " + "1" * HOSTILE + " death signal",
    "  rank      : " + "1" * HOSTILE + " (local_rank: ",
    "  local_ranks=[" + "1, " * (HOSTILE // 3),
    "  global_ranks=[" + "1," * (HOSTILE // 2) + "]",
    "exits with return code = " + "-" * HOSTILE,
    "Killing subprocess " + "x" * HOSTILE,
    "nnodes=1, num_local_procs=" + "2" * HOSTILE + ", node_rank=",
    "global_rank_mapping=defaultdict(<class 'list'>, {" + "'a': [0, " * (HOSTILE // 9),
    "process 1 spawned with command: " + "'--local_rank=" * (HOSTILE // 14),
    "Worker " + "1" * HOSTILE + " has failed",
    "- (ip=" + "1" * HOSTILE + ", pid=1) world_rank=1, local_rank=1, node_rank=",
    "Training failed due to worker errors:\n[Rank " + "1, " * (HOSTILE // 3),
    "Worker PID: " + "1" * HOSTILE + " died Worker IP address: " + "a" * 300,
    "srun: error: " + "n" * HOSTILE + ": task 1: Killed",
    "srun: error: node1: tasks " + "1-" * (HOSTILE // 2) + ": Killed",
    "srun: error: node1: task 1: " + "K" * HOSTILE,
    "*** STEP " + "1." * (HOSTILE // 2) + " ON n CANCELLED AT",
    "Detected " + "1" * HOSTILE + " oom-kill",
    "noticed that process rank 1 with PID 1 on node " + "n" * HOSTILE + " exited on signal",
    "mpiexec detected that one or more processes exited with non-zero status\n"
    + "Process name: [["
    + "1," * (HOSTILE // 2),
    "process 1 terminated with " + "exit code " * (HOSTILE // 10),
    "[rank: 1] Child process with PID " + "1" * HOSTILE + " terminated with code",
    "Rank 1: found NaN in local grad norm node: " + "n " * (HOSTILE // 2),
    "Error: Rank 1, node " + "n" * HOSTILE + ", device 1, iteration #",
    "Fatal Python error: " + "a " * (HOSTILE // 2),
    "terminate called after throwing an instance of " + "Rank 1" * (HOSTILE // 6),
    "x: line 1: " + " " * HOSTILE + "1 Killed",
    "x: line 1: 1 " + "Killed " * (HOSTILE // 7),
    "process 1 spawned with command: " * (HOSTILE // 32),
    "Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=1" + " " * HOSTILE,
    "Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=1 OpType=X) " * 12_000,
]


@pytest.mark.parametrize("line", HOSTILE_LINES, ids=lambda line: re.sub(r"\W+", "_", line[:24]))
def test_hostile_lines_parse_without_error(line):
    log = parse_log("hostile.log", line)
    assert len(log.exits) <= launchers.MAX_EXITS
    assert len(log.local_to_global) <= launchers.MAX_MAP


def test_an_endless_torchrun_summary_stays_bounded():
    entry = "[1]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 5)\n"
    log = parse_log("flood.log", "Failures:\n" + entry * 40_000)
    assert len(log.exits) == launchers.MAX_EXITS


def test_the_exit_list_keeps_its_first_and_latest_facts():
    text = "srun: error: n1: tasks 0-65535: Killed\n" * 2
    facts = parse_log("flood.log", text).exits
    assert len(facts) == launchers.MAX_EXITS
    assert facts[0].rank == 0 and facts[-1].rank == 65_535


def test_launcher_reader_is_usable_line_by_line():
    reader = LauncherReader()
    for line in sample_lines("torchrun_summary_cppo.log"):
        reader.feed(line)
    reader.finish()
    assert [(f.rank, f.first_observed) for f in reader.exits] == [(0, True)]


# -- analysis.parsers.nccl facts, as parse_log files them --------------------------------------

NCCL_WILD = SAMPLES / "public" / "nccl_wild"


def test_it_gives_a_collective_fact_the_reporters_rank_when_the_line_has_none():
    line = (
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out."
    )
    log = parse_log("/logs/rank5.log", line)
    assert [(c.rank, c.seq, c.op) for c in log.collectives] == [(5, 469508, "ALLREDUCE")]
    assert log.watchdog[0].seq == 469508  # the older field is still filled


def test_it_files_peer_errors_with_the_reporters_rank():
    log = parse_log("/logs/rank3.log", (NCCL_WILD / "peer_gloo_rvc_1882.log").read_text())
    assert [(rank, local, fact.peer_addr) for rank, local, fact in log.peer_errors] == [
        (3, None, "127.0.0.1"),
        (3, None, "192.168.70.92"),
    ]


def test_it_files_nccl_configuration_and_slow_rank_reports():
    log = parse_log("n.log", (NCCL_WILD / "config_nccl_1357.log").read_text())
    assert ("net", "IBext") in {(c.key, c.value) for _, _, c in log.nccl_config}
    slow = parse_log("s.log", (NCCL_WILD / "slow_megatron_bridge_resiliency.log").read_text())
    assert 76 in {s.rank for s in slow.slow_reports}


def test_a_slurm_job_step_is_not_a_training_step():
    log = parse_log("slurm.out", sample("slurm_oom_cancelled.log"))
    assert log.steps == []


def test_a_process_last_words_keep_the_watchdog_report_on_the_same_line():
    line = (
        "[rank3]: terminate called after throwing an instance of 'c10::DistBackendError' what():  "
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with "
        "exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 90 milliseconds before "
        "timing out."
    )
    log = parse_log("x.log", line)
    assert [(f.rank, f.exit_code) for f in log.exits] == [(3, -6)]
    assert [(w.rank, w.seq) for w in log.watchdog] == [(3, 1)]


def test_it_reads_a_summary_quoted_from_its_middle():
    # huggingface/accelerate#1519 as pasted: the first agent's summary starts at entry [3].
    text = SAMPLES.parent / "corpus" / "12-torchrun-root-cause-not-first" / "gpu187" / "logs"
    log = parse_log("agent-node0.log", (text / "agent-node0.log").read_text())
    assert [(f.rank, f.exit_code, f.first_observed) for f in log.exits] == [
        (3, 1, False),
        (0, 1, True),
    ]
    orphan = parse_log("x.log", "  rank      : 5 (local_rank: 1)\n  exitcode  : -9 (pid: 77)\n")
    assert [(f.rank, f.local_rank, f.pid, f.exit_code) for f in orphan.exits] == [(5, 1, 77, -9)]


def test_it_numbers_each_pdsh_nodes_deepspeed_teardown_on_its_own():
    # deepspeed/launcher/launch.py lines as pdsh prefixes them with the worker's name.
    text = "\n".join(
        [
            "worker-0: [INFO] [launch.py:315:sigkill_handler] Killing subprocess 100",
            "worker-1: [INFO] [launch.py:315:sigkill_handler] Killing subprocess 200",
            "worker-0: [INFO] [launch.py:315:sigkill_handler] Killing subprocess 101",
            "worker-1: [INFO] [launch.py:315:sigkill_handler] Killing subprocess 201",
        ]
    )
    assert [(f.pid, f.local_rank) for f in parse_log("ds.log", text).exits] == [
        (100, 0),
        (200, 0),
        (101, 1),
        (201, 1),
    ]


def test_a_deepspeed_teardown_shorter_than_its_spawn_count_places_no_pid():
    # deepspeedai/DeepSpeed#5302: the exit line's command is the last spawned (--local_rank=4,
    # five processes) but the paste keeps two "Killing subprocess" lines: their order is not
    # the local ranks'. (A whole list, as in DeepSpeedExamples#626, still is.)
    killing = "[INFO] [launch.py:315:sigkill_handler] Killing subprocess"
    text = "\n".join(
        [
            f"[2024-03-20 20:31:29,210] {killing} 3353707",
            f"[2024-03-20 20:31:29,240] {killing} 3353708",
            "[2024-03-20 20:31:29,269] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', "
            "'-u', 'src/train_bash.py', '--local_rank=4', '--stage', 'sft'] exits with return "
            "code = 1",
        ]
    )
    exits = parse_log("ds.log", text).exits
    assert [(f.pid, f.local_rank) for f in exits if f.pid] == [(3353707, None), (3353708, None)]
    whole = text.replace("'--local_rank=4'", "'--local_rank=1'")
    exits = parse_log("ds.log", whole).exits
    assert [(f.pid, f.local_rank) for f in exits if f.pid] == [(3353707, 0), (3353708, 1)]
