"""The line reader's signals in a whole snapshot (ParsedSnapshot.signals) and what they fix in
the facts the verdict reads: exits in any wording, rendezvous and communicator set-up failures
phrased otherwise, NCCL lines that only a pid ties to a rank, NCCL RAS per node."""

from __future__ import annotations

from datetime import UTC, datetime

import analysis
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.snapshot_parse import parse_snapshot
from tests.analysis.sample_evidence import SAMPLES, drop_rank_process, load_snapshot, pid_of_rank

RAS = SAMPLES / "public" / "ncclras"


def _killed_rank_3(line: str | None) -> SnapshotEvidence:
    snapshot = drop_rank_process(load_snapshot("outside"), 3)
    if line is not None:
        snapshot.nodes[0].logs["/var/log/train/launcher.log"] = line
    return snapshot


def test_the_lab_s_own_launcher_line_is_an_exit_of_its_rank():
    line = "2026-11-29 09:23:25 rank 3 (pid 19304) exited with exitcode 137 (signal 9)\n"
    parsed = parse_snapshot(_killed_rank_3(line))
    state = parsed.ranks[3]
    assert (state.exit_code, state.exit_line) == (137, line.strip())
    assert not [p for p in parsed.problems if "launcher.log" in p["source"]]
    diagnosis = analysis.diagnose(_killed_rank_3(line))
    assert diagnosis.classification == "A" and 3 in diagnosis.suspect_ranks
    assert "137" in diagnosis.summary
    without = analysis.diagnose(_killed_rank_3(None))
    assert "137" not in without.summary  # the line is the only evidence of the code


def test_a_store_wait_timeout_inside_a_launcher_traceback_is_a_rendezvous_failure():
    node = NodeEvidence(node="n0", hostname="n0")
    node.logs["/var/log/train/torchrun.log"] = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/rendezvous/'
        'c10d_rendezvous_backend.py", line 155, in _create_tcp_store\n'
        "    store = TCPStore(\n"
        "RuntimeError: connect() timed out. Original timeout was 60000 ms.\n"
    )
    parsed = parse_snapshot(SnapshotEvidence(nodes=[node], expected_world_size=8))
    assert [line for _, line in parsed.rendezvous_errors] == [
        "RuntimeError: connect() timed out. Original timeout was 60000 ms."
    ]
    assert analysis.diagnose(SnapshotEvidence(nodes=[node])).classification == "init"


def test_nccl_s_socket_set_up_failing_is_a_rendezvous_failure_and_names_its_rank_by_pid():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 2)
    for path in list(node.logs):
        node.logs[path] = "\n".join(node.logs[path].splitlines()[:1])  # no step completed
    node.logs["/var/log/train/nccl.log"] = (
        f"{node.hostname}:{pid}:{pid + 7} [2] NCCL WARN Bootstrap : no socket interface found\n"
        f"{node.hostname}:{pid}:{pid + 7} [2] NCCL INFO init.cc:1089 -> 3\n"
    )
    parsed = parse_snapshot(snapshot)
    log = next(log for _, log in parsed.logs if log.path.endswith("nccl.log"))
    assert [fact.rank for fact in log.nccl_warn] == [2]
    assert {line for _, line in parsed.rendezvous_errors} >= {
        f"{node.hostname}:{pid}:{pid + 7} [2] NCCL WARN Bootstrap : no socket interface found"
    }
    assert parsed.signals.by_rank[2].first_failure.kind == "init"


def test_each_rank_s_signals_say_when_it_last_moved_what_failed_first_and_whom_it_blames():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    node.logs["/var/log/train/rank1.log"] += (
        "[rank1]:[E626 09:33:21.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        "0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at "
        "work: 808, last enqueued NCCL work: 808, last completed NCCL work: 807.\n"
        "[rank1]: RuntimeError: Rank 1 successfully reached monitoredBarrier, but received "
        "errors while waiting for send/recv from rank 3. Please check rank 3 logs.\n"
    )
    parsed = parse_snapshot(snapshot)
    one = parsed.signals.by_rank[1]
    assert one.first_failure.kind == "timeout"
    assert one.first_failure.at == datetime(2026, 6, 26, 9, 33, 21, 906457, UTC)
    assert one.peers == (3,)
    assert parsed.signals.victims_of(3) == [1]
    zero = parsed.signals.by_rank[0]
    assert zero.first_failure is None and zero.last_progress.step == 5
    assert zero.last_moved_at == parsed.ranks[0].last_step_at


def test_the_kernel_s_lines_are_signals_of_the_rank_whose_pid_they_name():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 1)
    node.dmesg = (
        f"[Sat Nov 29 09:23:40 2026] Out of memory: Killed process {pid} (python) "
        "total-vm:1234kB\n"
        "[Sat Nov 29 09:23:41 2026] mlx5_core 0000:3b:00.0 ens1f0: Link down\n"
    )
    signals = parse_snapshot(snapshot).signals
    assert signals.by_rank[1].first_failure.kind == "oom"
    assert [s.kind for s in signals.by_node["lab-node-0"]] == ["link"]


def test_ncclras_output_of_a_node_names_the_missing_rank_through_its_address_and_pid():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 1)
    node.ncclras = (
        (RAS / "docs_2_29.json")
        .read_text()
        .replace("1524345", str(pid))
        .replace('"size": 2', '"size": 4')
    )
    signals = parse_snapshot(snapshot).signals
    ((where, report),) = signals.ras
    assert where == "lab-node-0" and report.format == "json"
    assert [(s.kind, s.peer) for s in signals.ras_signals] == [("ras", 1)]


def test_ncclras_ok_is_kept_as_evidence():
    snapshot = load_snapshot("outside")
    snapshot.nodes[0].ncclras = (RAS / "docs_ok.txt").read_text()
    signals = parse_snapshot(snapshot).signals
    assert [s.kind for s in signals.ras_signals] == ["ras_ok"]
    assert signals.ras[0][1].ok


def test_a_launcher_s_start_line_ties_a_dead_rank_s_pid_for_the_kernel_s_oom_kill():
    snapshot = _killed_rank_3(
        "2026-11-29 09:23:10 started rank 3 (local_rank 3) pid 19304\n"
        "2026-11-29 09:23:10 holding 2 connections of rank 3\n"
        "2026-11-29 09:23:11 holding 2 connections of rank 2\n"
    )
    snapshot.nodes[
        0
    ].dmesg = (
        "[Sat Nov 29 09:23:25 2026] Out of memory: Killed process 19304 (python) total-vm:9kB\n"
    )
    parsed = parse_snapshot(snapshot)
    assert parsed.signals.by_rank[3].first_failure.kind == "oom"
    assert not [p for p in parsed.problems if p["source"].endswith("launcher.log")]


def test_one_bar_line_times_its_steps_with_the_bar_s_own_pace():
    # hiyouga/LlamaFactory#8261's bar as published, run into a Trainer line in LlamaFactory's
    # format (constructed): one tqdm line, no second one to time it against.
    node = NodeEvidence(node="n0", hostname="n0")
    node.logs["/var/log/train/rank5.log"] = (
        "  1%|▏         | 24/1752 [01:08<1:22:56,  2.88s/it][INFO|2025-06-02 11:17:52] "
        "trainer.py:2103 >> Saving model checkpoint to saves/checkpoint-24\n"
    )
    snapshot = SnapshotEvidence(
        nodes=[node], collected_at=datetime(2025, 6, 2, 11, 17, 53, tzinfo=UTC)
    )
    parsed = parse_snapshot(snapshot)
    state = parsed.ranks[5]
    assert (state.last_step, state.step_time) == (24, 2.88)
