"""What a post-mortem draft says, and the guided branches, read from diagnoses: the story of
what happened, advice fitted to the cause, and each class's questions pre-answered."""

from __future__ import annotations

from dataclasses import replace

import pytest

import analysis
from analysis.diagnosis import Diagnosis
from analysis.verdict import Quote
from readings import branches, stories
from readings import postmortem as story
from tests.analysis.sample_evidence import load_snapshot


def _a(exit_code: int | None, kinds: list[str], status: str = "exited") -> Diagnosis:
    """Class A: rank 3 on node-1 left; ranks 0-2 wait in all_reduce."""
    return _stored(
        {
            "classification": "A",
            "world_size": 4,
            "suspect_ranks": [3],
            "suspect_ranks_compact": "3",
            "suspect_nodes": ["node-1"],
            "missing_ranks": [3],
            "last_completed_step": 1200,
            "progress": {"method": "last_step_age", "progressing": False, "step_time_s": 120.0},
            "per_rank": [
                {"rank": r, "node": "node-0", "status": "in_collective", "exit_code": None}
                for r in range(3)
            ]
            + [
                {"rank": 3, "node": "node-1", "status": status, "exit_code": exit_code, "frame": ""}
            ],
            "evidence": [
                {"kind": k, "node": "node-1", "rank": 3, "text": f"{k} line"} for k in kinds
            ],
            "stack_groups": [{"rank_list": [0, 1, 2], "kind": "collective", "frame": "all_reduce"}],
            "flight_recorder": None,
        }
    )


def _stored(d: dict) -> Diagnosis:
    """A diagnosis as a page reads it back from the database."""
    return Diagnosis.from_json(d)


def test_an_oom_kill_gets_memory_advice_and_no_crash_handler():
    d = _a(137, ["dmesg_oom", "exit_code"])
    assert stories.departure_cause(d).key == "oom"
    advice = " ".join(story.prevention(d, "A"))
    assert "Memory headroom on node-1: the OOM killer took rank 3" in advice
    assert "Crash handler" not in advice
    text = story.what_happened(d, "A")
    assert text == (
        "The job (4 ranks) stopped after step 1200. Rank 3 on node-1 was killed by the kernel "
        "OOM killer (exit code 137). The other ranks (0-2) waited for it in all_reduce, where a "
        "collective needs every rank."
    )


@pytest.mark.parametrize(("code", "kinds", "key"), [(-6, [], "abort"), (139, [], "segfault"),
                                                     (1, ["log_error"], "exception")])  # fmt: skip
def test_a_crash_gets_the_print_then_clean_up_handler(code, kinds, key):
    d = _a(code, kinds)
    assert stories.departure_cause(d).key == key
    assert any(a.startswith("Crash handler (rank 3") for a in story.prevention(d, "A"))


def test_a_sigkill_without_the_oom_killer_asks_who_sent_it():
    advice = " ".join(story.prevention(_a(137, ["exit_code"]), "A"))
    assert "Find who sent SIGKILL to rank 3 on node-1" in advice
    assert "Crash handler" not in advice
    # Who sends one: the scheduler, a cgroup or container limit, an operator (issue 19).
    assert "the scheduler (preemption" in advice and "cgroup or container limit" in advice
    assert "an operator" in advice
    assert "init_process_group(timeout=...)" not in advice  # no generic watchdog line
    text = story.what_happened(_a(137, ["exit_code"]), "A")
    assert text.count("exit code 137") == 1, text


def test_the_cause_the_responders_confirmed_wins_and_parse_problems_are_no_factor():
    d = _a(None, [], status="missing")
    assert stories.departure_cause(d).key == "unknown"
    confirmed = stories.departure_cause(d, "killed")
    assert (confirmed.key, confirmed.evidence_key, confirmed.confirmed) == (
        "killed",
        "unknown",
        True,
    )
    assert "killed with SIGKILL" in story.what_happened(d, "A", "killed")
    assert "Find who sent SIGKILL" in " ".join(story.prevention(d, "A", "killed"))
    problem = {"node": "node-0", "source": "x.log", "problem": "x.log: unreadable"}
    d = _stored({**d.to_json(), "parse_problems": [problem]})
    assert not any("could not be read" in f for f in story.contributing_factors(d))
    assert story.evidence_quality(d) == ["node-0: x.log: unreadable"]


def test_the_watchdog_timeout_comes_from_the_measured_step_time():
    assert story.watchdog_timeout_s(120.0) == 900  # 5 x 120 s + 5 min: 15 min
    assert story.watchdog_timeout_s(0.4) == 360
    assert story.watchdog_timeout_s(None) is None
    d = _a(137, ["dmesg_oom"])
    watchdog = Quote(
        "watchdog",
        "node-0",
        0,
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=3600000) ran for 3600060 ms",
    )
    d = replace(d, evidence=(*d.evidence, watchdog))
    assert story.observed_watchdog_timeout_s(d) == 3600
    advice = " ".join(story.prevention(d, "A"))
    assert "Set the NCCL watchdog timeout to 15 min (it was 60 min)" in advice
    assert "5 x the measured step time of 120 s" in advice
    factors = story.contributing_factors(d)
    assert "The watchdog waited 60 min for 120 s steps" in factors[0]


def test_no_flight_recorder_dump_asks_to_turn_it_on():
    advice = " ".join(story.prevention(_a(137, ["dmesg_oom"]), "A"))
    assert "Turn the flight recorder on" in advice
    assert "No flight-recorder dumps were collected." in story.contributing_factors(_a(137, []))


def test_env_differences_and_shell_files_get_start_up_checks():
    d = _stored(
        {
            "classification": "C",
            "world_size": 4,
            "stack_groups": [{"rank_list": [0, 1, 2, 3], "kind": "collective", "frame": "x"}],
            "env_diffs": [
                {
                    "name": "NCCL_SOCKET_IFNAME",
                    "expected_per_rank": False,
                    "values": [
                        {"value": "lo", "ranks": "0-1", "nodes": ["node-0"]},
                        {"value": "eth1", "ranks": "2-3", "nodes": ["node-1"]},
                    ],
                }
            ],
            "shell_init": [
                {"node": "node-1", "path": "/root/.bashrc", "name": "NCCL_SOCKET_IFNAME"}
            ],
            "flight_recorder": {"dump_count": 4},
            "progress": {},
        }
    )
    advice = " ".join(story.prevention(d, "C"))
    assert "refuse to start if the ranks differ" in advice
    assert "Remove NCCL_ exports from shell start-up files" in advice
    assert "Crash handler" not in advice and "flight recorder" not in advice.lower()
    assert story.what_happened(d, "C").endswith(
        "NCCL_SOCKET_IFNAME was lo on node-0; eth1 on node-1 "
        "(NCCL_SOCKET_IFNAME set in /root/.bashrc on node-1)."
    )
    c = branches.branch(d, "C")
    suggested = {q["id"]: q["suggested"] for q in c["questions"]}
    assert suggested == {
        "same_collective": "yes",
        "what_differs": "env",
        "shell_init": "yes",
        "slow_or_dead": "unknown",
    }


@pytest.mark.parametrize(
    ("sample", "classification", "ids"),
    [
        ("outside", "A", ["who", "why", "others_wait", "slow_or_dead"]),
        ("mismatch", "B", ["different", "who", "code_path", "slow_or_dead"]),
        ("init", "init", ["any_step", "who", "rendezvous"]),
    ],
)
def test_each_class_has_its_branch_pre_answered_from_real_evidence(sample, classification, ids):
    d = _stored(analysis.diagnose(load_snapshot(sample)).to_json())
    assert d.classification == classification
    b = branches.branch(d, classification)
    assert [q["id"] for q in b["questions"]] == ids
    for q in b["questions"]:
        assert q["suggested"] in dict(q["choices"]), q["id"]
    assert b["actions"][0] == branches.SECOND_SNAPSHOT and b["actions"][-1] == branches.RESOLVE
    story_text = story.what_happened(d, classification)
    assert not any(word in story_text for word in ("Read ", "Look at", "Check "))


def test_the_b_branch_names_the_call_site_that_differs():
    d = _stored(analysis.diagnose(load_snapshot("mismatch")).to_json())
    code_path = branches.question(d, "B", "code_path")
    assert code_path["suggested"] == "rank_branch"  # one rank left the order
    assert code_path["basis"] == "the odd ranks' call site: train_step (train_lab.py:60)"
    assert story.what_happened(d, "B").endswith(
        "rank 0 called gloo:broadcast at train_step (train_lab.py:60)."
    )


def test_a_straggler_branch_points_at_the_slow_ranks_data_loading():
    d = _stored(
        {
            "classification": "straggler",
            "suspect_ranks": [1],
            "suspect_nodes": ["node-0"],
            "per_rank": [
                {"rank": 0, "node": "node-0", "pid": 10},
                {"rank": 1, "node": "node-0", "pid": 11, "frame": "load_batch (train.py:40)"},
            ],
            "progress": {"method": "two_snapshots", "progressing": True},
        }
    )
    b = branches.branch(d, "straggler")
    assert {q["id"]: q["suggested"] for q in b["questions"]} == {
        "progressing": "yes",
        "who": "suspect",
        "where_time": "data",
    }
    assert branches.ENV_COMPARE in b["actions"]
    assert "Log per-rank step, data and communication times" in story.prevention(d, "straggler")[0]
