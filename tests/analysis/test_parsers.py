"""Each parser on real captured or published text, and on garbage."""

import json
import pickle
import random

import pytest

from analysis.parsers.dmesg import parse_dmesg
from analysis.parsers.environ import parse_environ
from analysis.parsers.flight_recorder import (
    UnsafePickleError,
    parse_flight_recorder,
    safe_loads,
)
from analysis.parsers.logs import parse_log, rank_from_filename
from analysis.parsers.nvidia_smi import parse_nvidia_smi
from analysis.parsers.ps import parse_ps
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.parsers.shell_init import parse_shell_init
from tests.analysis.sample_evidence import SAMPLES, read_public

OUTSIDE = SAMPLES / "outside"


def test_it_reads_ps_rows_with_state():
    rows, problems = parse_ps((OUTSIDE / "ps.txt").read_text())
    assert problems == []
    assert len(rows) == 5  # torchrun launcher + 4 ranks
    launcher = [r for r in rows if "torchrun" in r.args]
    assert len(launcher) == 1
    assert all(r.state in "RSDZT" for r in rows)
    assert {r.ppid for r in rows if r is not launcher[0]} == {launcher[0].pid}


def test_it_reports_ps_lines_it_cannot_read():
    rows, problems = parse_ps("  PID  PPID STAT ELAPSED COMMAND\nnot a row\n 12 1 S 5 python x\n")
    assert [r.pid for r in rows] == [12]
    assert len(problems) == 1 and "not a row" in problems[0]


def test_it_reads_a_real_environ():
    raw = next(OUTSIDE.glob("environ_*")).read_bytes()
    env, problems = parse_environ(raw)
    assert problems == []
    assert env["WORLD_SIZE"] == "4"
    assert env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert env["RANK"] in {"0", "1", "2", "3"}


def test_it_reads_py_spy_json_and_text_of_the_same_process_alike():
    json_file = next(OUTSIDE.glob("pyspy_*.json"))
    text_file = json_file.with_suffix(".txt")
    from_json, p1 = parse_pyspy(json_file.read_text())
    from_text, p2 = parse_pyspy(text_file.read_text())
    assert p1 == [] and p2 == []
    main_json, main_text = main_thread(from_json), main_thread(from_text)
    assert main_json.name == main_text.name == "MainThread"
    assert [f.name for f in main_json.frames] == [f.name for f in main_text.frames]
    assert [f.line for f in main_json.frames] == [f.line for f in main_text.frames]
    # innermost first, as py-spy prints it
    assert main_json.frames[-1].name == "<module>"


def test_it_reads_published_py_spy_text_without_thread_names():
    threads, problems = parse_pyspy(read_public("pyspy_threads_public.txt"))
    assert problems == []
    assert [t.active for t in threads] == [False, True]
    chosen = main_thread(threads)
    assert chosen.frames[0].name == "all_gather_into_tensor"
    assert chosen.frames[0].filename == "torch/distributed/distributed_c10d.py"
    threads, _ = parse_pyspy(read_public("pyspy_hung_public.txt"))
    assert main_thread(threads).frames[0].line == 266


def test_it_reads_lab_step_lines_with_rank_and_time():
    facts = parse_log("/var/log/train/rank3.log", (OUTSIDE / "rank3.log").read_text())
    assert facts.file_rank == 3
    assert facts.steps[-1].rank == 3
    assert facts.steps[-1].step == 5
    assert facts.steps[-1].at is not None and facts.steps[-1].at.tzinfo is not None
    assert facts.steps[-1].step_time == pytest.approx(0.2, abs=0.1)


def test_it_reads_torchrun_prefixes_and_failure_summary():
    facts = parse_log("torchrun.log", (SAMPLES / "crash" / "torchrun.log").read_text())
    assert {s.local_rank for s in facts.steps} == {0, 1, 2, 3}
    assert all(s.rank is None for s in facts.steps)  # [defaultN] is a local rank
    codes = {(e.rank, e.exit_code) for e in facts.exits if e.rank is not None}
    assert (2, -6) in codes
    assert any("terminate called" in e.line for e in facts.errors)


@pytest.mark.parametrize(
    ("line_index", "rank", "seq", "op", "completed"),
    [(0, 1, 808, None, 807), (1, 1, 469508, "ALLREDUCE", None), (2, 118, 2398459, None, 2398458)],
)
def test_it_reads_every_watchdog_version(line_index, rank, seq, op, completed):
    facts = parse_log("job.log", read_public("watchdog.log"))
    fact = facts.watchdog[line_index]
    assert (fact.rank, fact.seq, fact.op, fact.last_completed) == (rank, seq, op, completed)
    assert facts.fr_disabled


def test_it_reads_the_desync_report_and_detail_mismatch():
    desync = parse_log("rank0.log", read_public("desync.log"))
    assert desync.lagging == {7: 183}
    assert desync.watchdog[0].op == "ALLREDUCE" and desync.watchdog[0].seq == 315
    detail = parse_log("x.log", read_public("detail_mismatch.log"))
    assert len(detail.mismatches) == 1


def test_it_reads_megatron_iterations_and_nccl_lines():
    megatron = parse_log("/logs/train_rank_0.out", read_public("megatron.log"))
    assert megatron.steps[0].step == 10
    assert megatron.steps[0].rank == 0  # from the file name
    assert megatron.steps[0].step_time == pytest.approx(0.3562)
    nccl = parse_log("nccl.log", read_public("nccl_info.log"))
    assert nccl.nccl_env == {"NCCL_SOCKET_IFNAME": "bond0"}
    assert "NET/IB : Using" in nccl.nccl_net[0].line


@pytest.mark.parametrize(
    ("name", "rank"),
    [("rank3.log", 3), ("/x/train_rank_12.log", 12), ("trace_rank-7", 7), ("train.log", None)],
)
def test_it_takes_the_rank_from_the_file_name(name, rank):
    assert rank_from_filename(name) == rank


@pytest.mark.parametrize(
    ("name", "pid"),
    [
        ("dmesg_oom_iso.txt", 1440763),
        ("dmesg_oom_ctime.txt", 7899),
        ("dmesg_oom_syslog.txt", 15784),
    ],
)
def test_it_finds_oom_kills_in_every_timestamp_style(name, pid):
    facts = parse_dmesg(read_public(name))
    assert [k.pid for k in facts.oom_kills] == [pid]
    assert facts.problems == []


def test_it_reads_xid_numbers_and_marks_fatal_ones():
    facts = parse_dmesg(read_public("dmesg_xid.txt"))
    assert [x.xid for x in facts.xids] == [48, 63, 13, 31, 74]
    assert {x.xid for x in facts.xids if x.fatal} == {48, 74}
    assert facts.xids[1].pid == 1896
    assert facts.xids[4].meaning == "NVLink error"


@pytest.mark.parametrize(
    ("name", "utils"),
    [
        ("nvidia_smi_515.txt", [100, 100, 99]),
        ("nvidia_smi_580.txt", [11, 7]),
        ("nvidia_smi_query.csv", [36, 0]),
    ],
)
def test_it_reads_nvidia_smi_table_and_csv(name, utils):
    facts = parse_nvidia_smi(read_public(name))
    assert facts.problems == []
    assert [g.utilization for g in facts.gpus] == utils
    assert all(g.memory_total_mib for g in facts.gpus)


def test_it_reads_nccl_settings_in_shell_start_up_files():
    text = (
        "/etc/profile:41:export NCCL_SOCKET_IFNAME=eth1\n"
        "/root/.bashrc:7:# export NCCL_DEBUG=INFO\n"
        "/etc/profile.d/nccl.sh:2:export NCCL_IB_HCA='mlx5_0'\n"
    )
    settings, problems = parse_shell_init(text)
    assert problems == []
    assert [(s.path, s.line_number, s.name, s.value) for s in settings] == [
        ("/etc/profile", 41, "NCCL_SOCKET_IFNAME", "eth1"),
        ("/etc/profile.d/nccl.sh", 2, "NCCL_IB_HCA", "mlx5_0"),
    ]


def test_it_reads_a_real_gloo_flight_recorder_pickle_and_json_alike():
    pickled = parse_flight_recorder("trace_rank_0", (OUTSIDE / "fr/trace_rank_0").read_bytes())
    as_json = parse_flight_recorder(
        "trace_rank_0.json", (OUTSIDE / "fr/trace_rank_0.json").read_bytes()
    )
    assert pickled.problems == [] and as_json.problems == []
    assert pickled.rank == as_json.rank == 0
    assert [(e.pg, e.seq, e.op) for e in pickled.entries] == [
        (e.pg, e.seq, e.op) for e in as_json.entries
    ]
    assert pickled.entries[-1].op == "gloo:all_reduce"
    assert not pickled.entries[-1].completed and pickled.entries[0].completed


class _Evil:
    def __reduce__(self):
        return (print, ("owned",))


def test_it_refuses_pickles_that_import_anything():
    with pytest.raises(UnsafePickleError, match=r"builtins\.print"):
        safe_loads(pickle.dumps(_Evil()))
    dump = parse_flight_recorder("trace_rank_1", pickle.dumps({"entries": [_Evil()]}))
    assert dump.entries == []
    assert "refusing to load builtins.print" in dump.problems[0]


def test_it_loads_plain_containers_through_the_safe_unpickler():
    value = {"a": [1, 2.5, None, True], "b": ("x", b"y"), "c": {"d": -3}}
    assert safe_loads(pickle.dumps(value, protocol=5)) == value


GARBAGE = [
    b"",
    b"\x00\x01\x02\xff" * 50,
    "Ünïcödé ✓ \n\t\n".encode(),
    json.dumps({"not": "a list"}).encode(),
    b"[1, 2, {",
    bytes(random.Random(7).getrandbits(8) for _ in range(4096)),
]


@pytest.mark.parametrize("blob", GARBAGE)
def test_parsers_never_crash_on_garbage(blob):
    text = blob.decode("utf-8", errors="replace")
    parse_ps(text)
    parse_environ(blob)
    threads, problems = parse_pyspy(text)
    assert threads == [] or problems
    parse_log("rank0.log", text)
    parse_dmesg(text)
    parse_nvidia_smi(text)
    parse_shell_init(text)
    dump = parse_flight_recorder("trace_rank_0", blob)
    assert dump.entries == [] and dump.problems


def test_it_reads_the_processes_section_of_nvidia_smi():
    facts = parse_nvidia_smi(read_public("nvidia_smi_580_processes.txt"))
    assert [(p.gpu, p.pid, p.name, p.memory_mib) for p in facts.processes] == [
        (0, 58, "python3.12", 6046),
        (1, 59, "python3.12", 6048),
    ]
    assert [g.utilization for g in facts.gpus] == [100, 100]


def test_a_rank_written_in_the_line_beats_the_file_name():
    text = (
        "2026-11-29 09:30:01,123 INFO rank=5 step=42 loss=2.3\n"
        "2026-11-29 09:30:02,123 INFO step=43 loss=2.2\n"
    )
    facts = parse_log("/var/log/train/rank3.log", text)
    assert [(s.rank, s.step) for s in facts.steps] == [(5, 42), (3, 43)]


def test_it_reads_who_a_desync_snapshot_and_nccl_communicators_name():
    # pytorch/pytorch#152623 (desync snapshot) and NVIDIA/nccl#1027 (Init COMPLETE), verbatim.
    text = (
        "[rank0]:[E515 18:36:47.343377708 ProcessGroupNCCL.cpp:1937] Rank 0\n"
        "         - Snapshot of ranks' latest states:\n"
        "           #315 started ranks:\n"
        "             [0, 1, 2] started ALLREDUCE\n"
        "           #317 started ranks:\n"
        "             [3, 4, 5, 6] started _ALLGATHER_BASE\n"
        "UIBE-DC-GPUSVR-01:13313:13992 [4] NCCL INFO comm 0x55b4098c56f0 rank 4 nranks 8 "
        "cudaDev 4 nvmlDev 4 busId ce000 commId 0xb9b42cb8fce289f2 - Init COMPLETE\n"
    )
    facts = parse_log("/logs/rank0.log", text)
    assert facts.named_ranks == {0, 1, 2, 3, 4, 5, 6}
    assert [(c.rank, c.pid, c.nranks) for c in facts.comm_inits] == [(4, 13313, 8)]


def test_it_keeps_rendezvous_errors_apart():
    text = (
        '    "message": "RendezvousConnectionError: The connection to the C10d store has '
        'failed. See inner exception for details.",\n'
    )
    facts = parse_log("/logs/torchrun.log", text)
    assert len(facts.rendezvous_errors) == 1 and facts.steps == []
    # A hostile 1.2 MB snapshot line: read in linear time, past the list cap nothing is taken.
    assert parse_log("/logs/x.log", "[" + "1, " * 400_000 + "1] started X\n").named_ranks <= {1}


def test_it_reads_nvidia_smi_rows_without_backtracking_on_hostile_ones():
    # A row of spaces between a GPU index and "On" took 16 s with the old patterns; rows are
    # now split into cells, and rows longer than nvidia-smi ever prints are skipped.
    hostile = "|   0" + " " * 2000 + "x On |\n" + ("|" + " " * 399 + "|\n") * 3000
    assert parse_nvidia_smi(hostile).gpus == []
    row = "|   0  Tesla T4" + " " * 10 + "On  |   00000000:00:1B.0 Off |  0 |\n"
    usage = "| N/A 52C P0 71W / 70W |    6049MiB /  15360MiB |    100%      Default |\n"
    gpu = parse_nvidia_smi(row + usage + "|" + "1" * 100_000 + "MiB / 2MiB | 9% |\n").gpus[0]
    assert (gpu.name, gpu.memory_used_mib, gpu.utilization) == ("Tesla T4", 6049, 100)


def test_a_connection_that_could_not_be_made_is_a_set_up_failure():
    # NVIDIA/nccl-tests#166: NCCL's socket layer failing to connect while the communicator is
    # set up is a set-up (init) failure, though the line also speaks of a connection; the same
    # log's "Connection closed by remote peer" is a connection lost, not set-up by itself.
    made = (
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.2<45763> failed : Software caused connection abort\n"
    )
    lost = (
        "ubuntu:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed "
        "by remote peer node1<57557>\n"
    )
    assert len(parse_log("nccl.log", made).rendezvous_errors) == 1
    assert parse_log("nccl.log", lost).rendezvous_errors == []
