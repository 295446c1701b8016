"""The watch's judgement as data: steps from log tails, thresholds, slow vs stalled, gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from watch import progress
from watch.progress import Before, HeartbeatView, Settings, judge, log_progress
from watch.reading import NodeReading, Process

T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
FAST = Settings(multiplier=5, floor_s=4, checkpoint_allowance_s=60)


def lab_lines(rank: int, steps: range, *, start: datetime = T0, every: float = 0.5) -> str:
    lines = []
    for step in steps:
        at = start + timedelta(seconds=every * step)
        stamp = at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"
        lines.append(
            f"{stamp} INFO [rank{rank}] host=lab-node-0 step={step} loss=0.5 step_time={every:.3f}s"
        )
        lines.append(f"{stamp} INFO [rank{rank}] host=lab-node-0 timers data=0.1s compute=0.1s")
    return "\n".join(lines) + "\n"


def processes(*pids: int) -> list[Process]:
    return [Process(pid, "Sl", 100, "python train.py") for pid in pids]


def node(name: str, pids=(5, 6), logs: dict | None = None, ok: bool = True) -> NodeReading:
    return NodeReading(
        node=name, ok=ok, processes=processes(*pids) if ok else [], logs=logs or {},
        error="" if ok else "unreachable: connection refused",
    )  # fmt: skip


def test_it_reads_the_last_global_step_and_when_from_the_tails():
    logs = {"/l/rank0.log": lab_lines(0, range(1, 11)), "/l/rank1.log": lab_lines(1, range(1, 9))}
    found = log_progress(logs, after_step=None)
    assert found.step == 8  # rank 1 completed only 8: the step every rank completed
    assert found.at == T0 + timedelta(seconds=4)
    assert found.ranks == 2
    assert found.recent_s == 0.5
    assert all(d == 0.5 for d in found.durations)


def test_only_new_steps_are_learned():
    logs = {"/l/rank0.log": lab_lines(0, range(1, 11))}
    assert len(log_progress(logs, after_step=None).durations) == 10
    assert len(log_progress(logs, after_step=8).durations) == 2


def test_step_time_from_timestamps_when_the_line_has_none():
    text = "".join(
        f"2026-11-30 09:00:{2 * s:02d},000 INFO iteration {s}/ 100 | loss 1\n" for s in range(1, 6)
    )
    found = log_progress({"/l/megatron.log": text}, after_step=None)
    assert found.step == 5
    assert found.durations and all(abs(d - 2.0) < 1e-9 for d in found.durations)


def test_a_checkpoint_being_written_after_the_last_step_is_noticed():
    base = lab_lines(0, range(1, 5))
    started = base + "2026-11-30 09:00:03,000 saving checkpoint at iteration 4 to /ckpt\n"
    finished = started + "2026-11-30 09:00:09,000 successfully saved checkpoint from iteration 4\n"
    assert log_progress({"/l/r0.log": started}, after_step=None).checkpoint_since == datetime(
        2026, 11, 30, 9, 0, 3, tzinfo=UTC
    )
    assert log_progress({"/l/r0.log": finished}, after_step=None).checkpoint_since is None
    assert log_progress({"/l/r0.log": base}, after_step=None).checkpoint_since is None
    hf = base + "Saving model checkpoint to /out/checkpoint-500\n"
    assert log_progress({"/l/r0.log": hf}, after_step=None).checkpoint_since is not None


def test_a_checkpoint_before_the_last_step_is_over():
    text = (
        lab_lines(0, range(1, 3))
        + "2026-11-30 09:00:01,100 saving checkpoint at iteration 2 to /ckpt\n"
        + lab_lines(0, range(3, 5))
    )
    assert log_progress({"/l/r0.log": text}, after_step=None).checkpoint_since is None


def test_threshold_is_step_time_times_multiplier_with_a_floor_and_a_checkpoint_allowance():
    settings = Settings(multiplier=5, floor_s=120, checkpoint_allowance_s=900)
    assert progress.threshold(settings, 60.0, checkpoint=False) == 300
    assert progress.threshold(settings, 1.0, checkpoint=False) == 120
    assert progress.threshold(settings, 60.0, checkpoint=True) == 1200
    assert progress.threshold(settings, None, checkpoint=False) == progress.UNLEARNED_THRESHOLD_S


def test_slow_steps_do_not_become_the_normal():
    learned = progress.learn((), [0.5] * 10)
    assert progress.learned_step_time(learned) == 0.5
    after = progress.learn(learned, [2.0] * 40)  # a straggler's steps
    assert progress.learned_step_time(after) == 0.5


def test_a_healthy_job_is_ok_and_learns_its_step_time():
    logs = {"/l/rank0.log": lab_lines(0, range(1, 21))}
    now = T0 + timedelta(seconds=10.5)
    result = judge([node("n0", logs=logs), node("n1")], Before(), FAST, now)
    assert result.state == "ok" and result.raise_reason is None
    assert result.last_step == 20 and result.step_time_s == 0.5
    assert result.threshold_s == 4  # 5 x 0.5 s is under the floor
    assert result.step_nodes == ("n0",)
    assert result.pids == {"n0": (5, 6), "n1": (5, 6)}


def test_a_job_whose_step_is_older_than_the_threshold_is_stalled():
    logs = {"/l/rank0.log": lab_lines(0, range(1, 21))}
    before = Before(last_step=20, last_step_at=T0 + timedelta(seconds=10), step_times=(0.5,) * 10)
    result = judge([node("n0", logs=logs), node("n1")], before, FAST, T0 + timedelta(seconds=15))
    assert result.state == "stalled" and result.raise_reason == "stalled"
    assert "step 20 is 5 s old (threshold 4 s)" in result.reason


def test_a_checkpoint_gives_the_job_longer():
    logs = {
        "/l/rank0.log": lab_lines(0, range(1, 21))
        + "2026-11-30 09:00:10,100 saving checkpoint at iteration 20 to /ckpt\n"
    }
    before = Before(last_step=20, last_step_at=T0 + timedelta(seconds=10), step_times=(0.5,) * 10)
    result = judge([node("n0", logs=logs)], before, FAST, T0 + timedelta(seconds=15))
    assert result.state == "ok" and result.threshold_s == 64
    assert result.checkpoint_since is not None


def test_a_training_process_that_disappears_is_a_rank_gone():
    before = Before(last_step=20, last_step_at=T0, pids={"n0": (5, 6), "n1": (5, 6)})
    readings = [node("n0"), node("n1", pids=(5,))]
    result = judge(readings, before, FAST, T0 + timedelta(seconds=1))
    assert result.state == "gone" and result.raise_reason == "gone"
    assert result.gone == {"n1": (6,)}


def test_a_restarted_process_is_not_a_departure():
    before = Before(last_step=20, last_step_at=T0, pids={"n0": (5, 6)})
    result = judge([node("n0", pids=(5, 9))], before, FAST, T0 + timedelta(seconds=1))
    assert result.gone == {} and result.state == "ok"


def test_no_training_process_anywhere_is_idle_not_a_hang():
    before = Before(last_step=20, last_step_at=T0, pids={"n0": (5, 6), "n1": (5, 6)})
    result = judge([node("n0", pids=()), node("n1", pids=())], before, FAST, T0 + timedelta(60))
    assert result.state == "idle" and result.raise_reason is None


def test_a_straggler_is_slow_not_dead():
    slow = lab_lines(0, range(1, 11)) + lab_lines(0, range(11, 16), every=2.0, start=T0)
    before = Before(last_step=10, last_step_at=T0 + timedelta(seconds=5), step_times=(0.5,) * 10)
    now = T0 + timedelta(seconds=31)  # step 15 was logged at 30 s
    result = judge([node("n0", logs={"/l/rank0.log": slow})], before, FAST, now)
    assert result.state == "slow" and result.raise_reason is None
    assert result.step_time_s == 0.5 and result.recent_step_time_s == 2.0


def test_unreachable_nodes_are_not_a_hang():
    before = Before(last_step=20, last_step_at=T0, pids={"n0": (5, 6)})
    result = judge([node("n0", ok=False)], before, FAST, T0 + timedelta(seconds=60))
    assert result.state == "unreachable" and result.raise_reason is None
    assert result.pids == {"n0": (5, 6)}  # what it knew is kept for the next period


def test_a_step_node_that_does_not_answer_gets_twice_the_threshold():
    before = Before(last_step=20, last_step_at=T0, step_times=(0.5,) * 10, pids={"n0": (5, 6)})
    readings = [node("n0", ok=False), node("n1")]
    blip = judge(readings, before, FAST, T0 + timedelta(seconds=6))
    assert blip.state == "unreachable" and blip.raise_reason is None
    dead = judge(readings, before, FAST, T0 + timedelta(seconds=9))
    assert dead.state == "stalled" and dead.raise_reason == "stalled"


def test_pushed_heartbeats_count_as_progress():
    beats = [
        HeartbeatView(0, 41, T0 + timedelta(seconds=20), step_time_s=0.5),
        HeartbeatView(1, 40, T0 + timedelta(seconds=19), step_time_s=0.5),
    ]
    result = judge([node("n0")], Before(), FAST, T0 + timedelta(seconds=21), beats)
    assert result.last_step == 40 and result.state == "ok"
    later = judge(
        [node("n0")], Before(40, T0 + timedelta(seconds=19), (0.5,) * 5), FAST,
        T0 + timedelta(seconds=30), beats,
    )  # fmt: skip
    assert later.state == "stalled"


def test_a_heartbeat_flagged_checkpoint_extends_the_threshold():
    beats = [HeartbeatView(0, 40, T0, checkpoint=True)]
    before = Before(40, T0, (0.5,) * 5)
    result = judge([node("n0")], before, FAST, T0 + timedelta(seconds=30), beats)
    assert result.state == "ok" and result.threshold_s == 64


def test_a_node_clock_ahead_does_not_postpone_a_raise():
    future = T0 + timedelta(hours=1)
    logs = {"/l/rank0.log": lab_lines(0, range(1, 11), start=future)}
    result = judge([node("n0", logs=logs)], Before(), FAST, T0)
    assert result.last_step_at == T0


# --- a job that never completes a first step: still starting, or stuck in init --------------

SAMPLES = Path(__file__).resolve().parents[1] / "analysis" / "samples"
INIT_SETTINGS = Settings(multiplier=5, floor_s=120, checkpoint_allowance_s=60, init_threshold_s=600)


def _dump(scenario: str, pid: int) -> str:
    """A real py-spy dump the lab captured (tests/analysis/samples)."""
    return next((SAMPLES / scenario).rglob(f"pyspy_{pid}.txt")).read_text()


def starting(age_s: int, stacks: dict[int, str] | None, *, launcher: int = 20502) -> NodeReading:
    """A node whose three ranks (and their launcher) started age_s ago; stacks read or not."""
    ranks = (20503, 20504, 20505)
    reading = NodeReading(
        node="lab-node-0", ok=True,
        processes=[Process(launcher, "Ssl", age_s + 2, "torchrun train.py")]
        + [Process(pid, "Ssl", age_s, "python train.py") for pid in ranks],
    )  # fmt: skip
    if stacks is not None:
        reading.stacks = dict(stacks)
        reading.parents = {launcher: 1, **{pid: launcher for pid in ranks}}
    return reading


IN_INIT = {pid: _dump("init", pid) for pid in (20503, 20504, 20505)}


def test_a_job_younger_than_the_init_threshold_is_waiting():
    j = judge([starting(300, None)], Before(), INIT_SETTINGS, T0)
    assert j.state == "waiting" and j.raise_reason is None
    assert "300 s ago" in j.reason


def test_no_first_step_past_the_init_threshold_is_an_init_hang():
    j = judge([starting(601, None)], Before(), INIT_SETTINGS, T0)
    assert (j.state, j.raise_reason) == ("init", "init")
    assert "601 s" in j.reason and "600 s" in j.reason


def test_every_rank_inside_init_process_group_raises_after_the_floor():
    assert judge([starting(100, IN_INIT)], Before(), INIT_SETTINGS, T0).state == "waiting"
    j = judge([starting(121, IN_INIT)], Before(), INIT_SETTINGS, T0)
    assert (j.state, j.raise_reason) == ("init", "init")
    assert "init_process_group" in j.reason and "120 s" in j.reason


def test_the_launcher_stack_is_not_a_rank_outside_init():
    # torchrun's own stack is its agent's loop; it is the ranks' parent, so not a rank.
    stacks = {**IN_INIT, 20502: _dump("outside", 19304)}
    assert progress.init_stance([starting(121, stacks)]) == "init"


def test_one_rank_without_a_stack_leaves_the_long_threshold():
    stacks = {pid: text for pid, text in IN_INIT.items() if pid != 20505}
    assert progress.init_stance([starting(121, stacks)]) is None
    assert judge([starting(121, stacks)], Before(), INIT_SETTINGS, T0).state == "waiting"
    assert judge([starting(601, stacks)], Before(), INIT_SETTINGS, T0).state == "init"


def test_ranks_running_past_init_with_no_step_line_are_never_an_init_hang():
    # One rank in the data loader: the job runs, its step lines are not where the watch reads.
    stacks = {**IN_INIT, 20504: _dump("outside", 19304)}
    j = judge([starting(5000, stacks)], Before(), INIT_SETTINGS, T0)
    assert j.state == "waiting" and j.raise_reason is None
    assert "log globs" in j.reason


def test_a_silent_node_keeps_the_long_threshold():
    silent = node("lab-node-1", ok=False)
    assert progress.init_stance([starting(121, IN_INIT), silent]) is None


def test_a_job_that_stepped_once_is_judged_by_its_steps_not_init():
    before = Before(last_step=1, last_step_at=T0 - timedelta(seconds=30))
    j = judge([starting(5000, IN_INIT)], before, INIT_SETTINGS, T0)
    assert j.state == "ok" and j.raise_reason is None
