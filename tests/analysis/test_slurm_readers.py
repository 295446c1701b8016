"""What Slurm says about a job, read from its commands' real output (tests/analysis/samples/
slurm/, captured from Debian's Slurm 22.05 in the lab), and Slurm's words joined to the nodes
they are about."""

from pathlib import Path

import pytest

from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.schedulers import slurm
from analysis.schedulers.attach import SCHEDULER_LOG, with_scheduler_evidence
from analysis.signals import LineSource, read_text

SAMPLES = Path(__file__).parent / "samples" / "slurm"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def outputs(**frames: str) -> dict[str, str]:
    return {"job.rc": "0", "sacct.rc": "0", **frames}


@pytest.mark.parametrize("job_id", ["4417203", "4417203_7", "4417203+1", " 12 "])
def test_it_takes_plain_array_and_het_job_ids(job_id):
    assert slurm.valid_job_id(job_id) == job_id.strip()


@pytest.mark.parametrize("job_id", ["", "abc", "12; scancel 1", "12_", "1+2+3", "-1", "1" * 11])
def test_it_refuses_what_is_not_a_job_id(job_id):
    with pytest.raises(slurm.SlurmError, match="not a Slurm job id"):
        slurm.valid_job_id(job_id)


def test_a_running_job_gives_its_nodes_files_and_summary():
    job = slurm.job_from_scontrol(sample("scontrol-job-running.txt"), "1")
    assert job.state == "RUNNING" and job.active
    assert job.nodes == ("lab-node-0", "lab-node-1")
    assert job.node_list == "lab-node-[0-1]"
    assert job.batch_host == "lab-node-0"
    assert job.stdout == job.stderr == "/var/log/train/slurm-1.out"
    assert (job.name, job.user, job.partition, job.time_limit) == (
        "hangdesk-lab",
        "root",
        "lab",
        "UNLIMITED",
    )
    assert job.num_tasks == 4
    assert job.summary()["nodes"] == 2


def test_an_array_task_is_its_own_job():
    job = slurm.job_from_scontrol(sample("scontrol-job-array-task.txt"), "2_2")
    assert job.state == "RUNNING"
    assert len(job.nodes) == 1


def test_a_het_job_merges_its_components_and_a_component_stands_alone():
    whole = slurm.job_from_scontrol(sample("scontrol-job-het.txt"), "7")
    assert whole.het_components == 2
    assert whole.nodes == ("lab-node-0", "lab-node-1")
    component = slurm.job_from_scontrol(sample("scontrol-job-het-component.txt"), "7+1")
    assert component.nodes == ("lab-node-1",)


def test_pending_and_ended_jobs_are_refused_with_their_state_and_reason():
    pending = slurm.read_job(outputs(job=sample("scontrol-job-pending.txt")), "6")
    with pytest.raises(slurm.SlurmError, match=r"is PENDING \(JobHeldUser\).*no nodes"):
        slurm.refuse_unless_running(pending)
    for name, state in (
        ("scontrol-job-completed.txt", "COMPLETED"),
        ("scontrol-job-failed.txt", "FAILED"),
    ):
        ended = slurm.read_job(outputs(job=sample(name)), "5")
        with pytest.raises(slurm.SlurmError, match=f"is {state}.*has ended"):
            slurm.refuse_unless_running(ended)


def test_an_unknown_job_is_told_as_such():
    said = sample("scontrol-job-unknown.txt").split("rc=")[0]
    with pytest.raises(slurm.SlurmError, match="knows no job 999999"):
        slurm.read_job({"job": "", "job.err": said, "job.rc": "1"}, "999999")


def test_node_states_keep_the_reason_with_its_spaces():
    nodes = slurm.node_states(sample("scontrol-node-drain.txt"))
    drained = nodes["lab-node-1"]
    assert drained.state == "MIXED+DRAIN" and drained.bad
    assert drained.reason.startswith("Kill task failed [root@")
    assert drained.address.startswith("127.")
    assert not nodes["lab-node-0"].bad


@pytest.mark.parametrize(
    ("state", "bad"),
    [("DOWN*+DRAIN", True), ("IDLE*", True), ("ALLOCATED", False), ("MIXED", False),
     ("DOWN+NOT_RESPONDING", True), ("ALLOCATED+DRAIN", True), ("IDLE+POWERED_DOWN", False)],
)  # fmt: skip
def test_state_flags_say_which_nodes_are_out(state, bad):
    assert slurm.NodeState("n1", state).bad is bad


def test_sacct_steps_carry_exit_codes_and_signals():
    steps = {s.step_id: s for s in slurm.sacct_steps(sample("sacct-failed.txt"))}
    assert steps["9.0"].state == "FAILED" and steps["9.0"].exit_code == 3
    assert steps["9.batch"].exit_code == 9
    cancelled = {s.step_id: s for s in slurm.sacct_steps(sample("sacct-node-fail.txt"))}
    assert cancelled["1.0"].state == "CANCELLED" and cancelled["1.0"].signal == 15
    assert cancelled["1"].state == "NODE_FAIL" and cancelled["1"].failed
    running = slurm.sacct_steps(sample("sacct-running.txt"))
    assert not any(s.failed for s in running)


def test_running_steps_leave_out_batch_and_extern():
    assert slurm.running_steps(sample("scontrol-step.txt")) == ["1.0"]


def test_sacct_disabled_is_said_not_fatal():
    read = slurm.read_job(
        {
            "job": sample("scontrol-job-running.txt"),
            "job.rc": "0",
            "sacct": "",
            "sacct.rc": "1",
            "sacct.err": "sacct: error: Slurm accounting storage is disabled\n",
        },
        "1",
    )
    assert read.steps == [] and "accounting storage is disabled" in read.accounting


def test_slurm_words_reach_the_node_they_are_about_as_signals():
    read = slurm.read_job(
        outputs(
            job=sample("scontrol-job-running.txt"),
            nodes=sample("scontrol-node-drain.txt"),
            sacct=sample("sacct-failed.txt").replace("9", "1"),
        ),
        "1",
    )
    lines = slurm.evidence_lines(read)
    assert any(
        "lab-node-1 State=MIXED+DRAIN Reason=Kill task failed" in t for t in lines["lab-node-1"]
    )
    assert any("step 1.0 (bash) FAILED ExitCode=3:0" in t for t in lines["lab-node-0"])
    evidence = SnapshotEvidence(
        nodes=[NodeEvidence(node="lab-node-0"), NodeEvidence(node="lab-node-1")],
        scheduler={"lines": lines},
    )
    joined = with_scheduler_evidence(evidence)
    text = joined.nodes[1].logs[SCHEDULER_LOG]
    kinds = {s.kind for s in read_text(text, LineSource(path=SCHEDULER_LOG, node="lab-node-1"))}
    assert "node_state" in kinds
    assert evidence.nodes[1].logs == {}  # the input is not changed


@pytest.mark.parametrize(
    "hostile", [None, [], "x", {"lines": "x"}, {"lines": {"n": "x"}}, {"lines": {1: ["a"]}}]
)
def test_a_bundle_scheduler_entry_of_the_wrong_shape_adds_nothing(hostile):
    evidence = SnapshotEvidence(nodes=[NodeEvidence(node="n")], scheduler=hostile)
    assert with_scheduler_evidence(evidence).nodes[0].logs == {}


def _environ(**variables: str) -> bytes:
    return b"\0".join(f"{k}={v}".encode() for k, v in variables.items()) + b"\0"


PS = "PID PPID STAT ELAPSED COMMAND\n{rows}\n"


def test_srun_tasks_whose_rank_is_slurm_procid_are_ranks():
    from analysis.snapshot_parse import parse_snapshot

    # `srun python train.py`: the script sets RANK from SLURM_PROCID in os.environ, which
    # /proc/PID/environ never shows.
    node = NodeEvidence(
        node="gpu-1",
        ps=PS.format(rows="\n".join(f"{p} 1 S 60 python train.py" for p in (41, 42))),
        environ={
            41: _environ(SLURM_PROCID="2", SLURM_LOCALID="0", SLURM_NTASKS="4", NCCL_DEBUG="INFO"),
            42: _environ(SLURM_PROCID="3", SLURM_LOCALID="1", SLURM_NTASKS="4", NCCL_DEBUG="INFO"),
        },
    )
    snap = parse_snapshot(SnapshotEvidence(nodes=[node]))
    assert sorted(snap.ranks) == [2, 3]
    assert (snap.ranks[3].pid, snap.ranks[3].local_rank, snap.ranks[3].world_size) == (42, 1, 4)
    assert snap.env[2] == {"NCCL_DEBUG": "INFO"}  # Slurm's own numbering is no env difference


def test_under_srun_torchrun_the_launcher_is_not_a_rank():
    from analysis.snapshot_parse import parse_snapshot

    # `srun torchrun ...`: one task per node (SLURM_PROCID = the node's index), its children
    # carry RANK; the launcher's task id must not be read as a rank.
    node = NodeEvidence(
        node="gpu-1",
        ps=PS.format(
            rows="10 1 S 60 torchrun train.py\n"
            "11 10 S 59 python train.py\n12 10 S 59 python train.py"
        ),
        environ={
            10: _environ(SLURM_PROCID="1", SLURM_NTASKS="2"),
            11: _environ(SLURM_PROCID="1", RANK="2", LOCAL_RANK="0", WORLD_SIZE="4"),
            12: _environ(SLURM_PROCID="1", RANK="3", LOCAL_RANK="1", WORLD_SIZE="4"),
        },
    )
    snap = parse_snapshot(SnapshotEvidence(nodes=[node]))
    assert sorted(snap.ranks) == [2, 3]
    assert snap.ranks[2].pid == 11
