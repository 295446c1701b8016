"""diagnosis_json() on the main scenarios, built from real captured evidence (edited where a
scenario cannot be produced on this machine, as each test says)."""

import copy
import json
import random
from datetime import timedelta

from analysis.evidence import NodeEvidence, SnapshotEvidence, not_gathered, stopped_short
from tests.analysis.sample_evidence import (
    SAMPLES,
    diagnosis_json,
    drop_rank_process,
    load_snapshot,
    pid_of_rank,
    read_public,
    split_nodes,
)


def _evidence_kinds(diagnosis, rank=None):
    return {e["kind"] for e in diagnosis["evidence"] if rank is None or e["rank"] == rank}


def test_it_classifies_a_rank_stuck_outside_the_collective_as_A():
    result = diagnosis_json(load_snapshot("outside"))
    assert result["classification"] == "A"
    assert result["suspect_ranks"] == [3]
    assert result["missing_ranks"] == []
    assert result["confidence"] >= 0.8
    assert result["last_completed_step"] == 5
    assert "Rank 3" in result["summary"] and "SlowLoader.__next__" in result["summary"]
    assert "stack" in _evidence_kinds(result, rank=3)
    assert result["flight_recorder"]["first_mismatch"]["missing_rank_list"] == [3]


def test_it_classifies_missing_rank_as_A_and_quotes_the_oom_line():
    # The real hang with rank 3's process removed, and the node's dmesg holding a published
    # OOM-killer line whose pid is rank 3's.
    snapshot = load_snapshot("outside")
    pid = pid_of_rank(snapshot.nodes[0], 3)
    killed = drop_rank_process(snapshot, 3)
    # ... stamped during this job: a kill stamped before the job began is another process's
    # whatever its pid (analysis/jobtime.py), and the published line is from 2025.
    when = killed.nodes[0].collected_at.strftime("%a %b %d %H:%M:%S %Y")
    published = read_public("dmesg_oom_ctime.txt").replace("7899", str(pid))
    killed.nodes[0].dmesg = published.replace("Sun Mar 30 08:24:00 2025", when)
    # the rank's pid is known from the earlier snapshot, taken before the kill
    result = diagnosis_json(killed, previous=snapshot)
    assert result["classification"] == "A"
    assert result["missing_ranks"] == [3]
    assert result["ranks_seen"] == 3
    assert result["suspect_ranks"] == [3]
    assert result["suspect_nodes"] == ["lab-node-0"]
    oom = [e for e in result["evidence"] if e["kind"] == "dmesg_oom"]
    assert oom and oom[0]["rank"] == 3 and f"Killed process {pid}" in oom[0]["text"]
    assert "OOM killer" in result["summary"]
    assert result["confidence"] >= 0.9


def test_it_names_the_first_rank_to_exit_not_the_ones_the_launcher_stopped():
    result = diagnosis_json(load_snapshot("crash"))
    assert result["classification"] == "A"
    assert result["suspect_ranks"] == [2]
    assert result["summary"].startswith("Rank 2 did not come: it exited with code -6")
    exits = [e for e in result["evidence"] if e["kind"] == "exit_code"]
    assert exits[0]["rank"] == 2


def test_it_classifies_a_different_collective_as_B_from_the_flight_recorder():
    result = diagnosis_json(load_snapshot("mismatch"))
    assert result["classification"] == "B"
    assert result["suspect_ranks"] == [0]
    assert result["confidence"] >= 0.85
    first = result["flight_recorder"]["first_mismatch"]
    assert first["kind"] == "different_collective" and first["seq"] == 6
    assert "gloo:broadcast" in result["summary"]
    assert "flight_recorder" in _evidence_kinds(result)


def test_it_classifies_B_from_stacks_when_there_is_no_flight_recorder():
    snapshot = load_snapshot("mismatch")
    snapshot.nodes[0].flight_recorder = {}
    result = diagnosis_json(snapshot)
    assert result["classification"] == "B"
    assert result["suspect_ranks"] == [0]
    assert "broadcast" in result["summary"] and "all_reduce" in result["summary"]


def _all_in_same_collective():
    """The real hang, edited: rank 3 shows rank 0's all_reduce stack; no flight recorder."""
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    node.pyspy[pid_of_rank(node, 3)] = node.pyspy[pid_of_rank(node, 0)]
    node.flight_recorder = {}
    return snapshot


def test_it_classifies_same_collective_all_present_as_C_and_points_at_the_env_diff():
    snapshot = _all_in_same_collective()
    # rank 3's real environment from the run started with a leftover NCCL_SOCKET_IFNAME
    healthy = load_snapshot("healthy", "snap0").nodes[0]
    node = snapshot.nodes[0]
    node.environ[pid_of_rank(node, 3)] = healthy.environ[pid_of_rank(healthy, 3)]
    result = diagnosis_json(snapshot)
    assert result["classification"] == "C"
    assert result["suspect_ranks"] == [3]
    diff_names = {d["name"] for d in result["env_diffs"] if not d["expected_per_rank"]}
    assert "NCCL_SOCKET_IFNAME" in diff_names
    assert "NCCL_SOCKET_IFNAME" in result["summary"]
    env_evidence = [e for e in result["evidence"] if e["kind"] == "env_diff"]
    assert any("eth1 on rank" in e["text"] for e in env_evidence)


def test_it_points_C_at_nccl_settings_left_in_shell_start_up_files():
    snapshot = _all_in_same_collective()
    snapshot.nodes[0].shell_init = "/etc/profile:41:export NCCL_IB_HCA=mlx5_2\n"
    result = diagnosis_json(snapshot)
    assert result["classification"] == "C"
    assert result["suspect_nodes"] == ["lab-node-0"]
    assert result["shell_init"][0]["name"] == "NCCL_IB_HCA"
    assert "/etc/profile" in result["summary"]


def test_it_classifies_a_slow_rank_as_straggler_from_two_snapshots():
    result = diagnosis_json(
        load_snapshot("straggler", "snap1"), load_snapshot("straggler", "snap0")
    )
    assert result["classification"] == "straggler"
    assert result["suspect_ranks"] == [2]
    assert result["progress"]["progressing"] is True
    assert "load_batch_slowly" in result["summary"]


def test_it_classifies_a_progressing_job_as_healthy():
    result = diagnosis_json(load_snapshot("healthy", "snap1"), load_snapshot("healthy", "snap0"))
    assert result["classification"] == "healthy"
    assert result["suspect_ranks"] == []
    assert result["progress"]["step_after"] > result["progress"]["step_before"]


def test_it_says_healthy_from_one_snapshot_when_the_last_step_is_fresh():
    result = diagnosis_json(load_snapshot("healthy", "snap1"))
    assert result["classification"] == "healthy"
    assert result["progress"]["method"] == "last_step_age"


def test_it_calls_the_same_job_stuck_when_the_last_step_is_old():
    snapshot = load_snapshot("healthy", "snap1")
    snapshot.collected_at += timedelta(minutes=10)
    snapshot.nodes[0].collected_at += timedelta(minutes=10)  # the node was read then too
    result = diagnosis_json(snapshot)
    assert result["progress"]["progressing"] is False
    assert result["classification"] != "healthy"


def test_it_classifies_a_rendezvous_hang_as_init():
    result = diagnosis_json(load_snapshot("init"))
    assert result["classification"] == "init"
    assert result["missing_ranks"] == [3]
    assert result["suspect_ranks"] == [3]
    assert result["last_completed_step"] is None
    assert "init_process_group" in result["summary"]


def test_it_sees_no_progress_between_two_identical_hung_snapshots():
    later = load_snapshot("outside")
    earlier = copy.deepcopy(later)
    result = diagnosis_json(later, earlier)
    assert result["progress"] == {
        "method": "two_snapshots",
        "progressing": False,
        "age_s": None,
        "threshold_s": None,
        "step_time_s": None,
        "advanced_ranks": "",
        "stacks_changed": "",
        "step_before": 5,
        "step_after": 5,
        "note": "nothing moved between the looks",
    }
    assert result["classification"] == "A"


def test_it_diagnoses_a_log_only_snapshot_with_watchdog_lines():
    # Like `kubectl logs`: no ps, environ or stacks. Ranks 0-2 log a watchdog timeout (the
    # published line, edited to this job's sequence number); rank 3 is silent.
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    node.ps, node.environ, node.pyspy, node.flight_recorder = None, {}, {}, {}
    for rank in range(3):
        node.logs[f"/var/log/train/rank{rank}.log"] += (
            f"[rank{rank}]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
            f"0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
            "watchdog at work: 6, last enqueued NCCL work: 6, last completed NCCL work: 5.\n"
            f"[rank{rank}]:[E ProcessGroupNCCL.cpp:737] [Rank {rank}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=6, OpType=ALLREDUCE, Timeout(ms)=1800000) ran "
            "for 1802212 milliseconds before timing out.\n"
        )
    result = diagnosis_json(snapshot)
    assert [r["last_step"] for r in result["per_rank"]] == [5, 5, 5, 5]
    assert result["watchdog"]["stuck_collective"]["seq"] == 6
    assert result["watchdog"]["stuck_collective"]["op"] == "ALLREDUCE"
    assert result["classification"] == "A"
    assert result["suspect_ranks"] == [3]


def test_it_calls_a_rank_absent_from_a_log_only_bundle_unobserved_not_missing():
    # Absence of evidence is not evidence of absence: without a process table nothing says
    # rank 1 left; its log is simply not in the bundle.
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    node.ps, node.environ, node.pyspy, node.flight_recorder = None, {}, {}, {}
    del node.logs["/var/log/train/rank1.log"]
    del node.logs["/var/log/train/torchrun.log"]  # its [default1]: lines are rank 1's too
    result = diagnosis_json(snapshot)
    assert result["missing_ranks"] == []
    assert result["unobserved_ranks"] == [1]
    assert 1 not in result["suspect_ranks"]
    assert "rank 1" not in result["summary"].lower()
    assert [r["status"] for r in result["per_rank"]][1] == "unobserved"


def test_it_reports_a_rank_gone_from_a_node_whose_process_table_was_read():
    snapshot = drop_rank_process(load_snapshot("outside"), 1)
    result = diagnosis_json(snapshot)
    assert result["missing_ranks"] == [1]
    assert result["unobserved_ranks"] == []
    assert result["classification"] == "A"
    assert any(e["kind"] == "missing" and e["rank"] == 1 for e in result["evidence"])


def test_it_names_the_suspect_node_of_a_multi_node_job():
    result = diagnosis_json(split_nodes(load_snapshot("outside")))
    assert result["classification"] == "A"
    assert result["suspect_nodes"] == ["lab-node-1"]
    assert {r["node"] for r in result["per_rank"]} == {"lab-node-0", "lab-node-1"}


def test_it_treats_ranks_of_an_unreachable_node_as_unobserved_and_the_node_as_suspect():
    snapshot = split_nodes(load_snapshot("outside"))
    lost = snapshot.nodes[1]
    snapshot.nodes[1] = NodeEvidence(
        node=lost.node, status=not_gathered("unreachable: connection timed out")
    )
    result = diagnosis_json(snapshot)
    assert result["classification"] == "A"
    assert result["missing_ranks"] == []
    assert result["unobserved_ranks"] == [2, 3]
    assert result["suspect_ranks"] == []
    assert "lab-node-1" in result["suspect_nodes"]
    assert any(e["kind"] == "node_unreachable" for e in result["evidence"])


def test_a_node_whose_evidence_stopped_short_still_speaks_for_what_it_holds():
    # Bug (issue 17): "partial" (evidence intact up to the cut) read as "no evidence", so the
    # unreachable rule spoke first and turned this B hang into A (tests/analysis/stored/
    # schema2-partial.json is what the old engine stored for it).
    snapshot = load_snapshot("mismatch")
    snapshot.nodes[0].status = stopped_short("output cut at 300000 bytes")
    result = diagnosis_json(snapshot)
    assert result["classification"] == "B", result["summary"]
    assert result["rule"] != "unreachable"
    assert not any(e["kind"] == "node_unreachable" for e in result["evidence"])
    assert result["missing_ranks"] == [] and result["unobserved_ranks"] == []
    (problem,) = [p for p in result["parse_problems"] if p["source"] == "node"]
    assert problem["problem"].endswith("output cut at 300000 bytes")
    assert diagnosis_json(load_snapshot("mismatch"))["suspect_ranks"] == result["suspect_ranks"]


def test_a_node_cut_short_proves_nobody_gone():
    # Its process table may stop before a rank's row: absence needs a whole one.
    snapshot = split_nodes(drop_rank_process(load_snapshot("outside"), 3))
    snapshot.nodes[1].status = stopped_short("connection lost after 2 of 5 frames")
    result = diagnosis_json(snapshot)
    assert 3 not in result["missing_ranks"]


def test_it_quotes_a_fatal_xid_on_the_suspect_node():
    snapshot = drop_rank_process(load_snapshot("outside"), 3)
    snapshot.nodes[0].dmesg = read_public("dmesg_xid.txt")
    result = diagnosis_json(snapshot)
    xids = [e for e in result["evidence"] if e["kind"] == "xid"]
    assert any("NVLink" in e["text"] for e in xids)
    assert result["confidence"] >= 0.9


def test_it_says_unknown_for_an_empty_snapshot():
    result = diagnosis_json(SnapshotEvidence(nodes=[NodeEvidence(node="n0")]))
    assert result["classification"] == "unknown"
    assert result["world_size"] == 0


def test_its_output_is_json_and_deterministic():
    snapshot = split_nodes(load_snapshot("mismatch"))
    first = json.dumps(diagnosis_json(snapshot))
    snapshot.nodes.reverse()
    assert json.dumps(diagnosis_json(snapshot)) == first
    keys = json.loads(first).keys()
    for key in (
        "classification",
        "confidence",
        "world_size",
        "ranks_seen",
        "missing_ranks",
        "suspect_ranks",
        "suspect_nodes",
        "last_completed_step",
        "per_rank",
        "stack_groups",
        "env_diffs",
        "evidence",
        "summary",
        "parse_problems",
    ):
        assert key in keys


def test_it_reports_what_it_could_not_parse_per_node_and_file():
    snapshot = load_snapshot("outside")
    snapshot.nodes[0].flight_recorder["/var/log/train/fr/trace_rank_9"] = b"\x80\x04junk"
    snapshot.nodes[0].nvidia_smi = "NVIDIA-SMI has failed because it couldn't communicate"
    problems = diagnosis_json(snapshot)["parse_problems"]
    sources = {(p["node"], p["source"]) for p in problems}
    assert ("lab-node-0", "/var/log/train/fr/trace_rank_9") in sources
    assert ("lab-node-0", "nvidia-smi") in sources


def test_every_sample_scenario_has_its_readme_entry():
    readme = (SAMPLES / "README.md").read_text()
    for directory in SAMPLES.iterdir():
        if directory.is_dir() and directory.name not in ("capture", "__pycache__"):
            assert f"`{directory.name}/`" in readme


def test_it_leaves_slow_or_dead_open_when_stacks_move_but_no_step_completes():
    later = load_snapshot("outside")
    earlier = copy.deepcopy(later)
    node = earlier.nodes[0]
    # rank 0 was elsewhere in the earlier look: its stack moved, yet no step completed
    node.pyspy[pid_of_rank(node, 0)] = node.pyspy[pid_of_rank(node, 3)]
    result = diagnosis_json(later, earlier)
    assert result["progress"]["progressing"] is None
    assert result["progress"]["stacks_changed"] == "0"
    assert result["classification"] == "A"
    assert "slow or dead?" in result["summary"]


def _truncate_everything(snapshot, rng):
    for node in snapshot.nodes:
        for mapping in (node.environ, node.pyspy, node.logs, node.flight_recorder):
            for key, value in list(mapping.items()):
                mapping[key] = value[: rng.randrange(len(value) + 1)]
        if node.ps:
            node.ps = node.ps[: rng.randrange(len(node.ps) + 1)]
    return snapshot


def test_it_never_crashes_on_cut_or_corrupted_evidence():
    for seed in range(12):
        rng = random.Random(seed)
        scenario = ["outside", "mismatch", "init", "crash"][seed % 4]
        snapshot = _truncate_everything(load_snapshot(scenario), rng)
        result = diagnosis_json(snapshot)
        json.dumps(result)
        assert result["classification"] in {
            "A",
            "B",
            "C",
            "straggler",
            "init",
            "healthy",
            "unknown",
        }


def test_it_reads_gpu_utilisation_of_the_suspect_and_the_waiters():
    # The published T4 table, edited: its two processes are this job's ranks 0 and 3, and
    # rank 3's GPU idles at 0 % (a rank stuck on the CPU side keeps its memory, not its load).
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    table = read_public("nvidia_smi_580_processes.txt")
    table = table.replace("   58      C", f"{pid_of_rank(node, 0):>5}      C")
    table = table.replace("   59      C", f"{pid_of_rank(node, 3):>5}      C")
    table = table.replace("6051MiB /  15360MiB |    100%", "6051MiB /  15360MiB |      0%")
    node.nvidia_smi = table
    result = diagnosis_json(snapshot)
    gpu = {e["rank"]: e["text"] for e in result["evidence"] if e["kind"] == "gpu"}
    assert gpu[3] == "GPU 1 at 0% holding 6048MiB: stuck on the CPU side"
    assert gpu[0] == "GPU 0 at 100% holding 6046MiB: spinning in a collective"
    assert [r["gpu_util"] for r in result["per_rank"]] == [100, None, None, 0]


def test_it_ignores_oom_kills_from_before_the_job_started():
    # rank 3 is gone and its pid unknown (one snapshot): only a kill logged after the job's
    # first rank started can explain it; dmesg's kill from last year cannot.
    snapshot = drop_rank_process(load_snapshot("outside"), 3)
    old = read_public("dmesg_oom_ctime.txt")  # stamped 2025
    when = snapshot.nodes[0].collected_at.strftime("%a %b %d %H:%M:%S %Y")
    recent = f"[{when}] Out of memory: Killed process 4242 (python) total-vm:1kB\n"
    snapshot.nodes[0].dmesg = old
    stale = [e for e in diagnosis_json(snapshot)["evidence"] if e["kind"] == "dmesg_oom"]
    assert stale == []
    snapshot.nodes[0].dmesg = old + recent
    fresh = [e for e in diagnosis_json(snapshot)["evidence"] if e["kind"] == "dmesg_oom"]
    assert [e["text"] for e in fresh] == [recent.strip()]


def test_it_does_not_believe_a_world_size_or_rank_past_its_bound():
    # World sizes and rank numbers are claims of untrusted evidence, and the analysis is
    # linear in them: a manifest claiming a million ranks, or a log line naming rank 10^9,
    # must not make it build a million rows.
    node = NodeEvidence(
        node="n0",
        logs={
            "/l/rank0.log": "2026-11-29 09:23:20,203 INFO [rank0] host=vm step=1 step_time=0.2s\n",
            "/l/x.log": "2026-11-29 09:23:20,203 INFO [rank999999999] host=vm step=1\n",
        },
    )
    result = diagnosis_json(SnapshotEvidence(nodes=[node], expected_world_size=1_000_000))
    assert result["world_size"] == 1
    assert len(result["per_rank"]) == 1
    sources = {p["source"] for p in result["parse_problems"]}
    assert {"world size", "ranks"} <= sources


def test_every_kind_a_diagnosis_quotes_is_an_evidence_kind():
    from analysis import diagnose
    from analysis.signals.model import SIGNAL_KINDS
    from analysis.verdict import QuoteKind
    from tests.analysis.sample_evidence import load_snapshot

    assert set(SIGNAL_KINDS) <= {k.value for k in QuoteKind}
    quoted = set()
    for scenario in ("crash", "mismatch", "outside", "init", "straggler", "healthy"):
        stored = diagnose(load_snapshot(scenario)).to_json()
        quoted |= {e["kind"] for e in stored["evidence"]}
        assert all(type(e["kind"]) is str for e in stored["evidence"])  # stored as plain text
    assert quoted and quoted <= {k.value for k in QuoteKind}
