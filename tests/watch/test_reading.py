"""The watch's node read, run here with `sh -s` as sshd would run it: its frames, its bounds,
and settings that stay data."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hangdesk.frames import FrameReader
from watch import progress
from watch.reading import ReadPlan, reading_from_frames, render_script


def run_locally(plan: ReadPlan, tmp_path) -> tuple[FrameReader, bytes]:
    script = render_script(plan, "n0nce")
    done = subprocess.run(
        ["sh", "-s"], input=script, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin",
        "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    reader = FrameReader("n0nce", frame_cap=1 << 20, total_cap=1 << 22)
    reader.feed(done.stdout)
    return reader, done.stderr


def test_it_ships_the_matching_processes_and_the_log_tails(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text("x" * 5000 + "\nlast step line\n")
    (logs / "other.txt").write_text("not matched by the glob\n")
    # A duration no other process on a shared machine sleeps for: the read is machine-wide.
    sleeper = subprocess.Popen(["sleep", "30.0417"])
    try:
        plan = ReadPlan(
            process_pattern="^sleep 30[.]0417$", log_globs=(f"{logs}/*.log",), tail_bytes=100
        )
        reader, _ = run_locally(plan, tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert reader.ended
    reading = reading_from_frames("n0", reader.frames)
    assert reading.ok and reading.live_pids == [sleeper.pid]
    assert list(reading.logs) == [f"{logs}/rank0.log"]
    tail = reading.logs[f"{logs}/rank0.log"]
    assert len(tail) == 100 and tail.endswith("last step line\n")


def test_without_globs_it_is_only_a_presence_check(tmp_path):
    reader, _ = run_locally(ReadPlan(process_pattern="no-such-process-name"), tmp_path)
    assert reader.ended and set(reader.frames) == {"ps"} and reader.frames["ps"] == b""


@pytest.mark.parametrize(
    "glob",
    ["/tmp/$(touch {marker})*", "/tmp/`touch {marker}`", "/tmp/x'; touch {marker}; '*"],
)
def test_a_hostile_glob_is_a_glob_never_a_command(tmp_path, glob):
    marker = tmp_path / "pwned"
    plan = ReadPlan(process_pattern="x", log_globs=(glob.format(marker=marker),))
    reader, _ = run_locally(plan, tmp_path)
    assert reader.ended and not marker.exists()


def test_a_hostile_pattern_is_data(tmp_path):
    marker = tmp_path / "pwned"
    reader, _ = run_locally(ReadPlan(process_pattern=f"x'; touch {marker}; '"), tmp_path)
    assert reader.ended and not marker.exists()


def test_a_plan_the_spec_refuses_never_renders():
    with pytest.raises(ValueError):
        render_script(ReadPlan(process_pattern="x", log_globs=("relative/*.log",)), "n")
    with pytest.raises(ValueError):
        render_script(ReadPlan(process_pattern="x", tail_bytes=0), "n")


def test_the_temp_dir_is_removed(tmp_path):
    run_locally(ReadPlan(process_pattern="x"), tmp_path)
    assert list(tmp_path.glob("hdwatch.*")) == []


def test_while_no_first_step_came_it_reads_each_process_stack_and_parent(tmp_path):
    """A real Python process waiting in a function named like init's, read by real py-spy."""
    import shutil
    import sys
    import time

    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    program = tmp_path / "starting_train.py"
    program.write_text(
        "import time\n\ndef init_process_group():\n    time.sleep(60)\n\ninit_process_group()\n"
    )
    waiting = subprocess.Popen([sys.executable, str(program)])
    try:
        time.sleep(1.0)  # the interpreter is in the function, not still starting
        plan = ReadPlan(process_pattern="starting_train[.]py", stacks=True, pyspy_command=pyspy)
        reader, _ = run_locally(plan, tmp_path)
        without = reading_from_frames(
            "n0", run_locally(ReadPlan("starting_train[.]py"), tmp_path)[0].frames
        )
    finally:
        waiting.kill()
        waiting.wait()
    reading = reading_from_frames("n0", reader.frames)
    assert reading.live_pids == [waiting.pid]
    assert reading.parents == {waiting.pid: os.getpid()}
    assert "init_process_group" in reading.stacks[waiting.pid]
    assert progress.init_stance([reading]) == "init"
    assert without.stacks == {} and without.parents == {}  # only while asked
