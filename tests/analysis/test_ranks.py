"""The rank timeline rows: who is where, at which step, from which source."""

import copy

from analysis import extract_ranks
from analysis.evidence import NodeEvidence, SnapshotEvidence, not_gathered
from tests.analysis.sample_evidence import SAMPLES, load_snapshot, pid_of_rank


def test_it_identifies_ranks_by_their_rank_environment_variable():
    snapshot = load_snapshot("outside")
    ranks = extract_ranks(snapshot)
    node = snapshot.nodes[0]
    assert [r.rank for r in ranks] == [0, 1, 2, 3]
    for state in ranks:
        assert state.pid == pid_of_rank(node, state.rank)
        assert state.local_rank == state.rank
        assert state.world_size == 4
        assert state.state in {"R", "S", "D"}
        assert state.process_seen


def test_it_does_not_count_the_torchrun_launcher_as_a_rank():
    snapshot = load_snapshot("outside")
    launcher = [line for line in snapshot.nodes[0].ps.splitlines() if "torchrun" in line]
    launcher_pid = int(launcher[0].split()[0])
    assert launcher_pid not in {r.pid for r in extract_ranks(snapshot)}
    assert {r.ppid for r in extract_ranks(snapshot)} == {launcher_pid}


def test_it_records_stack_innermost_first_with_a_stable_signature():
    ranks = {r.rank: r for r in extract_ranks(load_snapshot("outside"))}
    assert ranks[0].stack[0].startswith("all_reduce (torch/distributed/distributed_c10d.py:")
    assert ranks[0].stack[-1].startswith("<module>")
    assert ranks[0].stack_signature == ranks[1].stack_signature == ranks[2].stack_signature
    assert ranks[3].stack_signature != ranks[0].stack_signature
    assert ranks[3].innermost_frame.startswith("SlowLoader.__next__")
    assert len(ranks[0].stack_signature) == 12


def test_it_takes_last_step_and_time_from_each_rank_log():
    ranks = extract_ranks(load_snapshot("outside"))
    assert {r.last_step for r in ranks} == {5}
    assert all(r.last_step_at is not None for r in ranks)


def test_it_builds_a_rank_timeline_from_logs_alone():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    node.ps, node.environ, node.pyspy = None, {}, {}
    ranks = extract_ranks(snapshot)
    assert [r.rank for r in ranks] == [0, 1, 2, 3]
    assert all(r.last_step == 5 and not r.process_seen for r in ranks)


def test_it_maps_torchrun_local_rank_prefixes_through_the_node_environment():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    # Keep only the launcher log: steps then come from "[defaultN]:step N done" lines.
    node.logs = {"/var/log/train/torchrun.log": (SAMPLES / "outside/torchrun.log").read_text()}
    ranks = {r.rank: r for r in extract_ranks(snapshot)}
    assert ranks[2].last_step == 5
    assert ranks[2].last_step_at is None  # the prefix lines carry no time


def test_it_reads_exit_codes_of_dead_ranks_from_the_launcher_log():
    ranks = {r.rank: r for r in extract_ranks(load_snapshot("crash"))}
    assert ranks[2].exit_code == -6
    assert ranks[0].exit_code == -15
    assert not any(r.process_seen for r in ranks.values())


def test_it_reports_a_stack_whose_rank_is_unknown():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 1)
    node.environ.pop(pid)
    from analysis.snapshot_parse import parse_snapshot

    parsed = parse_snapshot(snapshot)
    assert 1 in parsed.ranks  # still known from its log
    assert any(
        p["source"] == f"py-spy {pid}" and "rank unknown" in p["problem"] for p in parsed.problems
    )


def test_it_survives_a_snapshot_of_garbage():
    node = NodeEvidence(
        node="n0",
        ps="\x00garbage\nmore",
        environ={1: b"\xff\xfe RANK=x"},
        pyspy={1: "{not json"},
        dmesg="\x00" * 10,
        nvidia_smi="| nonsense |",
        logs={"rank0.log": "step=abc\n\x00"},
        flight_recorder={"trace_rank_0": b"\x80\x05junk"},
        shell_init="::::",
    )
    broken = copy.deepcopy(node)
    broken.status = not_gathered("unreachable: timed out")
    ranks = extract_ranks(SnapshotEvidence(nodes=[node, broken]))
    assert ranks == []
