"""The data + tensor parallel scenarios, observed over SSH like the others: the job really has
a dp and a tp group per rank (logs, flight recorder), the culprit and its victims wait where the
lab says (py-spy, flight recorder, watchdog lines), and the console's verdict is `expected`."""

from __future__ import annotations

import re

import pytest

from lab import cluster, rank_common, scenarios
from tests.lab.test_scenarios import _assert_console_concludes, _hung, _lab

pytestmark = pytest.mark.lab
GROUP_LINE = re.compile(
    r"\[rank(\d+)\] host=\S+ data parallel group (\d+) ranks=\[([\d, ]+)\], "
    r"tensor parallel group (\d+) ranks=\[([\d, ]+)\]"
)


def _ranks(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _groups_in_dumps(dumps: dict[int, dict]) -> dict[str, dict]:
    """Group name -> its desc and the ranks whose dumps hold entries of it (default group out)."""
    seen: dict[str, dict] = {}
    for rank, dump in dumps.items():
        for entry in dump["entries"]:
            name, desc = entry["process_group"]
            if name != "0":
                group = seen.setdefault(name, {"desc": desc, "ranks": set()})
                group["ranks"].add(rank)
    return {name: {"desc": g["desc"], "ranks": sorted(g["ranks"])} for name, g in seen.items()}


def _pending(dump: dict) -> list[dict]:
    return [e for e in dump["entries"] if not e["retired"]]


def _kind_of(groups: dict[str, dict], expected: dict) -> dict[str, str]:
    """Group name -> "dp" or "tp", from the desc torch recorded."""
    by_desc = {desc: kind for kind, desc in expected["group_desc"].items()}
    return {name: by_desc[g["desc"]] for name, g in groups.items()}


def _assert_two_groups_per_rank(lab, dumps: dict[int, dict]) -> dict[str, dict]:
    """Every rank is in one dp and one tp group, the ones `expected` lays out, and says so in
    its log and its flight recorder."""
    expected = lab.expected
    layout = expected["groups"]
    assert layout == rank_common.parallel_groups(4, 2)
    logged = {}
    for rank in range(4):
        match = GROUP_LINE.search(lab.log(rank))
        assert match and int(match.group(1)) == rank, lab.log(rank)[:2000]
        logged[rank] = (match.group(2), _ranks(match.group(3)), match.group(4))
        assert _ranks(match.group(5)) in layout["tp"] and rank in _ranks(match.group(5))
        assert logged[rank][1] in layout["dp"] and rank in logged[rank][1]
    groups = _groups_in_dumps(dumps)
    assert len(groups) == 4, groups
    # Each group as the dumps show it: its members among the ranks that left a dump.
    dumped = set(dumps)
    members = [sorted(set(g) & dumped) for g in layout["dp"] + layout["tp"]]
    assert sorted(g["ranks"] for g in groups.values()) == sorted(members)
    kinds = _kind_of(groups, expected)
    for rank, (dp_name, _, tp_name) in logged.items():
        if rank not in dumps:
            continue
        assert kinds[dp_name] == "dp" and kinds[tp_name] == "tp"
        # Each group counts its own sequence: step N is seq N in both of this rank's groups.
        for name in (dp_name, tp_name):
            seq = [e["collective_seq_id"] for e in dumps[rank]["entries"]
                   if e["process_group"][0] == name]  # fmt: skip
            assert seq == list(range(1, len(seq) + 1)), (rank, name, seq)
    return groups


def _assert_victims_wait_in_their_groups(lab, dumps: dict[int, dict], stacks: dict[int, str]):
    """The ranks `waiting_in` names are in the all_reduce of that kind of group, at the seq of
    the fault step, and their main thread is in the matching function."""
    expected = lab.expected
    kinds = _kind_of(_groups_in_dumps(dumps), expected)
    caller = {"tp": "reduce_tensor_parallel", "dp": "all_reduce_gradients"}
    fault = expected["fault_step"]
    for kind, ranks in expected["waiting_in"].items():
        for rank in ranks:
            pending = _pending(dumps[rank])
            assert len(pending) == 1, pending
            entry = pending[0]
            assert kinds[entry["process_group"][0]] == kind
            assert entry["profiling_name"] == "gloo:all_reduce"
            assert entry["collective_seq_id"] == fault
            assert stacks[rank].lstrip().startswith("all_reduce (")
            assert f"{caller[kind]} (lab/train.py" in stacks[rank]
            other = next(k for k in caller if k != kind)
            assert f"{caller[other]} (lab/train.py" not in stacks[rank]


def _assert_console_concludes_per_group(lab) -> None:
    """The console's verdict is `expected` (test_scenarios' check), and its per-rank rows
    blame the culprit only: the ranks waiting in either group's collective are not suspects."""
    diagnosis = _assert_console_concludes(lab)
    rows = {row["rank"]: row for row in diagnosis["per_rank"]}
    for kind, ranks in lab.expected["waiting_in"].items():
        for rank in ranks:
            assert rows[rank]["suspect"] is False, (kind, rows[rank], diagnosis["summary"])
    for rank in lab.expected["suspect_ranks"]:
        assert rows[rank]["suspect"] is True, (rows[rank], diagnosis["summary"])


class TestTpRankStall:
    @pytest.fixture(scope="class")
    def lab(self, lab_factory):
        yield from _lab(lab_factory, "tp-rank-stall")

    def test_the_job_has_data_and_tensor_parallel_groups(self, lab):
        dumps = _hung(lab, [0, 1, 2, 3])
        groups = _assert_two_groups_per_rank(lab, dumps)
        assert {g["desc"] for g in groups.values()} == {
            rank_common.DP_DESC,
            rank_common.TP_DESC,
        }

    def test_culprit_outside_collectives_victims_in_two_groups(self, lab):
        dumps = _hung(lab, [0, 1, 2, 3])
        stacks = lab.stacks()
        assert sorted(stacks) == [0, 1, 2, 3]
        assert lab.expected["suspect_ranks"] == [3]
        assert lab.expected["waiting_in"] == {"tp": [2], "dp": [0, 1]}
        suspect = stacks[3]
        assert suspect.lstrip().startswith(lab.expected["suspect_in"] + " (lab/train.py")
        assert "record_activation_stats (lab/train.py" in suspect
        assert "distributed_c10d" not in suspect
        _, state, _ = lab.run(1, f"ps -o stat= -p {lab.rank_pids(1)[3]}")
        assert state.strip()[0] == "S"
        _assert_victims_wait_in_their_groups(lab, dumps, stacks)
        # The culprit's tp sequence stops one short of its peer's: it never enqueued seq 5.
        stuck = lab.expected["stuck_group"]
        assert _pending(dumps[3]) == []
        name = _pending(dumps[2])[0]["process_group"][0]
        last = max(e["collective_seq_id"] for e in dumps[3]["entries"]
                   if e["process_group"][0] == name)  # fmt: skip
        assert last == stuck["seq"] - 1 and stuck["ranks"] == [2, 3]
        assert "Watchdog: no collective pending" in lab.log(3)

    def test_the_console_concludes_what_the_lab_expects(self, lab):
        _assert_console_concludes_per_group(lab)


class TestTpRankExit:
    @pytest.fixture(scope="class")
    def lab(self, lab_factory):
        yield from _lab(lab_factory, "tp-rank-exit")

    def test_dead_rank_gone_victims_wait_in_two_groups(self, lab):
        dumps = _hung(lab, [0, 1, 2])
        _assert_two_groups_per_rank(lab, dumps)
        assert lab.expected["missing_ranks"] == [3]
        assert sorted(lab.rank_pids(1)) == [2] and lab.flight_recorder(3) is None
        launcher = lab.read(1, "/var/log/train/launcher.log").decode()
        assert re.search(r"rank 3 \(pid \d+\) exited with exitcode 137", launcher)
        stacks = lab.stacks()
        assert sorted(stacks) == [0, 1, 2]
        _assert_victims_wait_in_their_groups(lab, dumps, stacks)
        fault = lab.expected["fault_step"]
        assert all(lab.last_step(r) == fault - 1 for r in range(4))

    def test_the_console_concludes_what_the_lab_expects(self, lab):
        _assert_console_concludes_per_group(lab)


class TestTpMismatch:
    @pytest.fixture(scope="class")
    def lab(self, lab_factory):
        yield from _lab(lab_factory, "tp-mismatch")

    def test_the_job_has_data_and_tensor_parallel_groups(self, lab):
        dumps = _hung(lab, [0, 1, 2, 3])
        _assert_two_groups_per_rank(lab, dumps)

    def test_different_ops_at_the_same_seq_of_one_tp_group(self, lab):
        dumps = _hung(lab, [0, 1, 2, 3])
        stacks = lab.stacks()
        expected = lab.expected
        assert expected["suspect_ranks"] == [3] and expected["classification"] == "B"
        assert stacks[3].lstrip().startswith("all_gather (")
        assert "gather_sequence_parallel (lab/train.py" in stacks[3]
        _assert_victims_wait_in_their_groups(lab, dumps, stacks)
        mine, peer = _pending(dumps[3]), _pending(dumps[2])
        assert len(mine) == len(peer) == 1
        mine, peer = mine[0], peer[0]
        assert mine["process_group"] == peer["process_group"]
        seq_id = expected["stuck_group"]["seq"]
        assert mine["collective_seq_id"] == peer["collective_seq_id"] == seq_id
        assert mine["profiling_name"] == expected["collectives"]["suspect"]
        assert peer["profiling_name"] == expected["collectives"]["others"]
        assert mine["input_sizes"] == peer["input_sizes"] != mine["output_sizes"]
        # The watchdog lines disagree the same way, at the same SeqNum of the same PG GUID.
        guid = "PG GUID {}({})".format(*mine["process_group"])
        seq = f"SeqNum={mine['collective_seq_id']}, OpType="
        assert f"{guid} Rank 1] Watchdog caught" in lab.log(3)
        assert f"{seq}ALLGATHER" in lab.log(3)
        assert f"{guid} Rank 0] Watchdog caught" in lab.log(2)
        assert f"{seq}ALLREDUCE" in lab.log(2)

    def test_the_console_concludes_what_the_lab_expects(self, lab):
        _assert_console_concludes_per_group(lab)


def test_group_scenarios_need_torch_and_two_by_two(tmp_path):
    """Refused before anything starts: in light mode there is no torch flight recorder, and
    with one rank per node there is no tensor parallel group."""
    for scenario in scenarios.GROUP_SCENARIOS:
        for options in ({"light": True}, {"ranks_per_node": 1}, {"nodes": 1}):
            opts = cluster.LabOptions(scenario=scenario, state_dir=tmp_path / "s", **options)
            with pytest.raises(cluster.LabError, match="at least 2 nodes and 2 ranks per node"):
                cluster.up(opts)
        assert not (tmp_path / "s").exists()


def test_group_layout_and_expectations_for_three_nodes():
    layout = rank_common.parallel_groups(6, 2)
    assert layout == {"dp": [[0, 2, 4], [1, 3, 5]], "tp": [[0, 1], [2, 3], [4, 5]]}
    names = [f"lab-node-{i}" for i in range(3)]
    exp = scenarios.expected("tp-rank-stall", 3, 2, 7, names)
    assert exp["suspect_ranks"] == [5] and exp["suspect_node"] == "lab-node-2"
    assert exp["stuck_group"] == {"kind": "tp", "ranks": [4, 5], "seq": 7}
    assert exp["waiting_in"] == {"tp": [4], "dp": [0, 1, 2, 3]}
    assert exp["missing_ranks"] == [] and exp["last_global_step"] == 6
    mismatch = scenarios.expected("tp-mismatch", 2, 2, 5, names[:2])
    assert mismatch["classification"] == "B" and mismatch["suspect_in"] == "all_gather"
