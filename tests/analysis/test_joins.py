"""The joins the engine makes between lines (issue 17, "Joins it does not make"): a kernel line
naming a pid and the rank whose environ has it; processes in state T or D; the rank whose log
stops while the others go on to time out; a rank saving a checkpoint while the others wait,
its length against the collective timeout; a rank that died of an exception, quoted by the
line saying what happened. Each on evidence built around lines from public reports."""

from __future__ import annotations

from datetime import timedelta

from analysis import diagnose
from tests.analysis.synthetic import T0, Job, in_collective, outside


def _verdict(job: Job) -> dict:
    return diagnose(job.evidence()).to_json()


def _stuck(**kw) -> Job:
    """Every rank in the same all_reduce, the last step ten minutes ago."""
    return Job(age_s=600, **kw)


# ------------------------------------------------------------------ kernel pid <-> environ pid

# akash-network/support#244 (shared/samples/real-lines.md): an MMU fault naming the process.
XID_31 = (
    "[Mon Dec  1 08:59:30 2026] NVRM: Xid (PCI:0000:00:07): 31, pid={pid}, name=python3.10, "
    "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ "
    "0x73ac_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE\n"
)


def test_an_xid_naming_a_pid_blames_the_rank_whose_environ_has_it():
    job = _stuck()
    job.dmesg[1] = XID_31.format(pid=job.ranks[6].pid)
    result = _verdict(job)
    assert result["classification"] == "A"
    assert result["suspect_ranks"] == [6] and result["missing_ranks"] == []
    assert any("Xid" in e["text"] and e["rank"] == 6 for e in result["evidence"])


def test_an_xid_naming_no_pid_of_the_job_blames_no_rank():
    job = _stuck()
    job.dmesg[1] = XID_31.format(pid=999999)
    assert 6 not in _verdict(job)["suspect_ranks"]


def test_an_oom_kill_of_a_ranks_pid_makes_it_gone_and_the_suspect():
    job = _stuck()
    job.ranks[3].alive = False
    job.dmesg[0] = (
        "[Mon Dec  1 08:55:00 2026] Out of memory: Killed process 4003 (python) "
        "total-vm:160000000kB, anon-rss:153000000kB, file-rss:0kB, shmem-rss:0kB\n"
    )
    result = _verdict(job)
    assert result["classification"] == "A" and result["suspect_ranks"] == [3]
    assert result["missing_ranks"] == [3]
    assert any("Killed process 4003" in e["text"] for e in result["evidence"])


# ------------------------------------------------------------------ processes in state T or D


def test_a_stopped_process_is_the_one_the_others_wait_for():
    job = _stuck()
    job.ranks[5].state = "T"
    job.ranks[5].frames = outside("poll", "selectors.py", 469)
    result = _verdict(job)
    assert result["classification"] == "A" and result["suspect_ranks"] == [5]
    assert "ps state T" in result["summary"] or "stopped" in result["summary"]


def test_a_process_in_uninterruptible_sleep_is_the_one_the_others_wait_for():
    job = _stuck()
    job.ranks[0].state = "D"
    job.ranks[0].frames = outside("read", "nfs_reader.py", 88)
    result = _verdict(job)
    assert result["classification"] == "A" and result["suspect_ranks"] == [0]
    assert "wchan" in result["check"]


def test_a_stopped_process_forbids_healthy_however_fresh_the_steps():
    job = Job()
    job.ranks[2].state = "T"
    assert _verdict(job)["classification"] != "healthy"


# ------------------------------------------------------------------ the silent rank


def _timeout_line(rank: int, at) -> str:
    stamp = at.strftime("%m%d %H:%M:%S")
    return (
        f"[rank{rank}]:[E{stamp}.033625188 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, "
        "NumelIn=306176, NumelOut=306176, Timeout(ms)=600000) ran for 600027 milliseconds "
        "before timing out.\n"
    )


def test_the_rank_whose_log_stopped_first_is_the_culprit_the_reporters_victims():
    # Logs only (kubectl logs): ranks 0-2 and 4-7 time out in collective #41; rank 3 wrote its
    # last step well before and nothing since.
    job = Job(age_s=30, steps=40)
    for rank in job.ranks.values():
        rank.alive = False
    for node in (0, 1):
        job.node_names[node] = f"pod-{node}"
    evidence = job.evidence()
    for node in evidence.nodes:
        node.ps = None
        node.environ.clear()
        for path in list(node.logs):
            rank = int(path.rsplit("rank", 1)[1].split(".")[0])
            if rank == 3:
                node.logs[path] = node.logs[path].rsplit("\n", 10)[0] + "\n"  # stopped early
            else:
                node.logs[path] += _timeout_line(rank, T0 - timedelta(seconds=5))
    result = diagnose(evidence).to_json()
    assert result["classification"] == "A"
    assert result["suspect_ranks"] == [3]


# ------------------------------------------------------------------ checkpoint saves


def _saving(job: Job, rank: int, began) -> None:
    stamp = began.strftime("%Y-%m-%d %H:%M:%S,000")
    # allenai/olmo-style wording (corpus 34 quotes another): the save begins, nothing after.
    job.ranks[rank].log = (
        f"{stamp} INFO [rank{rank}] Saving checkpoint to /checkpoints/step1000 "
        "(model and optimizer state)\n"
    )


def test_a_save_outlasting_the_collective_timeout_is_named_and_measured():
    job = Job(age_s=900, steps=40)
    _saving(job, 0, T0 - timedelta(seconds=890))
    for rank in range(1, 8):
        job.ranks[rank].log = _timeout_line(rank, T0 - timedelta(seconds=290))
    job.ranks[0].frames = [
        ("_write", "torch/serialization.py", 652),
        ("save", "torch/serialization.py", 629),
        ("save_checkpoint", "train.py", 201),
        TRAIN_CALL,
    ]
    result = _verdict(job)
    assert result["classification"] == "A" and result["suspect_ranks"] == [0]
    assert result["rule"] == "checkpoint_save"
    assert "/checkpoints/step1000" in result["summary"]
    assert "890 s, longer than the job's collective timeout (600 s)" in result["summary"]


def test_a_save_the_others_do_not_wait_for_is_no_hang():
    job = Job(age_s=1, steps=40)  # the steps go on
    _saving(job, 0, T0 - timedelta(seconds=30))
    job.ranks[0].log += job.ranks[0].log.replace("Saving checkpoint", "step=41 loss=1.0 x")
    assert _verdict(job)["classification"] == "healthy"


def test_a_rank_in_a_save_frame_while_the_others_wait_is_named_by_its_stack():
    job = _stuck()
    job.ranks[2].frames = [
        ("save", "torch/serialization.py", 629),
        ("save_checkpoint", "trainer.py", 88),
        TRAIN_CALL,
    ]
    result = _verdict(job)
    assert result["suspect_ranks"] == [2]
    assert result["rule"] == "checkpoint_save"
    assert "PyTorch's default collective timeout (600 s" in result["summary"]


TRAIN_CALL = ("train", "train.py", 300)


# ------------------------------------------------------------------ exception quoting


def test_a_rank_that_died_of_an_exception_is_quoted_by_what_happened():
    # The line saying what: not `Traceback (most recent call last):` nor `raise ValueError(`.
    job = _stuck()
    job.ranks[4].alive = False
    job.ranks[4].log = (
        "[rank4]: Traceback (most recent call last):\n"
        '[rank4]:   File "/workspace/train.py", line 210, in <module>\n'
        "[rank4]:     batch = next(loader)\n"
        '[rank4]:   File "/workspace/data.py", line 77, in __next__\n'
        "[rank4]:     raise ValueError(\n"
        "[rank4]: ValueError: sample 18234 has 0 tokens after truncation\n"
    )
    result = _verdict(job)
    assert result["suspect_ranks"] == [4]
    quoted = [e["text"] for e in result["evidence"] if e["rank"] == 4]
    assert any("ValueError: sample 18234 has 0 tokens" in t for t in quoted), quoted
    assert not any(
        t.strip().endswith(("Traceback (most recent call last):", "raise ValueError("))
        for t in quoted
    )


def test_the_others_in_the_collective_are_not_blamed_for_it():
    job = _stuck()
    job.ranks[4].alive = False
    assert _verdict(job)["suspect_ranks"] == [4]
    assert in_collective()[0][0] == "all_reduce"
