"""probe.sh on its own (no SSH): fallbacks for tools that are missing or refuse to run."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from analysis.evidence import GATHERED
from hangdesk.frames import parse_probe_output, render_probe
from hangdesk.plan import CollectionPlan

NVIDIA_SMI_TABLE = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   34C    P0            312W /  700W |   61234MiB /  81559MiB |    100%      Default |
"""


def _tool(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _run_probe(fake_bin: Path, tmpdir: Path | None = None) -> subprocess.CompletedProcess:
    plan = CollectionPlan(
        process_pattern="no-such-process-xyz", log_globs=[], flight_recorder_globs=[]
    )
    return subprocess.run(
        ["sh", "-s"],
        input=render_probe(plan),
        capture_output=True,
        env={
            "PATH": f"{fake_bin}:/usr/bin:/bin",
            "HOME": str(fake_bin),
            "TMPDIR": str(tmpdir or fake_bin),
        },
        timeout=60,
    )


def test_it_falls_back_to_plain_dmesg_and_captures_nvidia_smi(tmp_path):
    _tool(
        tmp_path,
        "dmesg",
        'if [ "$1" = -T ]; then echo "dmesg: unknown option -- T" >&2; exit 1; fi\n'
        'echo "[ 812.3] Out of memory: Killed process 4242 (python) total-vm:123kB"\n',
    )
    _tool(
        tmp_path,
        "nvidia-smi",
        'case "$1" in\n'
        '  --query-gpu=*) printf "index, utilization.gpu [%%]\\n0, 100 %%\\n" ;;\n'
        '  --query-compute-apps=*) printf "gpu_uuid, pid\\nGPU-1, 4242\\n" ;;\n'
        f"  *) cat <<'TABLE'\n{NVIDIA_SMI_TABLE}TABLE\n"
        "esac\n",
    )
    result = _run_probe(tmp_path)
    evidence = parse_probe_output("n", result.stdout)
    assert evidence.status == GATHERED, result.stderr
    assert evidence.system["dmesg source"] == "dmesg"
    assert "Out of memory: Killed process 4242" in evidence.dmesg
    assert "dmesg -T: dmesg: unknown option -- T" in evidence.system["probe errors"]
    assert evidence.nvidia_smi == NVIDIA_SMI_TABLE
    assert evidence.system["nvidia-smi gpus"] == "index, utilization.gpu [%]\n0, 100 %\n"
    assert evidence.system["nvidia-smi processes"] == "gpu_uuid, pid\nGPU-1, 4242\n"


def test_it_finds_shell_start_up_files_that_set_nccl_variables(tmp_path):
    (tmp_path / ".bashrc").write_text("alias ll='ls -l'\nexport NCCL_IB_DISABLE=1\n")
    result = _run_probe(tmp_path)
    evidence = parse_probe_output("n", result.stdout)
    assert f"{tmp_path}/.bashrc:export NCCL_IB_DISABLE=1" in evidence.shell_init.splitlines()


def test_it_leaves_no_temporary_files_behind(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = _run_probe(tmp_path, tmpdir=scratch)
    assert parse_probe_output("n", result.stdout).status == GATHERED
    assert list(scratch.iterdir()) == []


RAS_SAMPLES = Path(__file__).parents[1] / "analysis" / "samples" / "public" / "ncclras"


def _run_probe_with(fake_bin: Path, plan: CollectionPlan, timeout: float = 60):
    return subprocess.run(
        ["sh", "-s"],
        input=render_probe(plan),
        capture_output=True,
        env={"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(fake_bin), "TMPDIR": str(fake_bin)},
        timeout=timeout,
    )


def _quiet_plan(**kw) -> CollectionPlan:
    return CollectionPlan(
        process_pattern="no-such-process-xyz", log_globs=[], flight_recorder_globs=[], **kw
    )


def test_it_asks_ncclras_for_json_and_ships_what_it_printed(tmp_path):
    captured = tmp_path / "ras.json"
    captured.write_text((RAS_SAMPLES / "docs_2_28_7_missing_comma.json").read_text())
    # A stand-in for NCCL 2.28.7's client: it prints captured output when asked for JSON.
    _tool(
        tmp_path,
        "ncclras",
        f'[ "$1" = -f ] && [ "$2" = json ] || exit 2\ncat "{captured}"\n',
    )
    evidence = parse_probe_output("n", _run_probe_with(tmp_path, _quiet_plan()).stdout)
    assert evidence.status == GATHERED
    assert evidence.ncclras == captured.read_text()


def test_an_ncclras_without_json_is_asked_for_text(tmp_path):
    captured = tmp_path / "ras.txt"
    captured.write_text((RAS_SAMPLES / "nccl_1762_incomplete.txt").read_text())
    # NCCL 2.24-2.28.6: `-f` is no option of theirs (getopt's complaint, then the usage).
    _tool(
        tmp_path,
        "ncclras",
        'if [ "$1" = -f ]; then echo "ncclras: invalid option -- \'f\'" >&2; exit 1; fi\n'
        f'cat "{captured}"\n',
    )
    evidence = parse_probe_output("n", _run_probe_with(tmp_path, _quiet_plan()).stdout)
    assert evidence.ncclras == captured.read_text()
    assert "ncclras" not in evidence.system.get("probe errors", "")  # a version, no failure


def test_an_ncclras_that_hangs_or_streams_is_cut_off_and_the_rest_is_shipped(tmp_path):
    _tool(tmp_path, "ncclras", "exec sleep 600\n")
    started = time.monotonic()
    hung = _run_probe_with(tmp_path, _quiet_plan(command_timeout_s=2))
    evidence = parse_probe_output("n", hung.stdout)
    assert time.monotonic() - started < 30
    assert evidence.status == GATHERED and evidence.ncclras is None and evidence.ps is not None
    assert "ncclras exited 124" in evidence.system["probe errors"]
    _tool(tmp_path, "ncclras", "exec yes 'Group     Comms     Nodes'\n")
    streaming = _run_probe_with(tmp_path, _quiet_plan(artifact_cap_bytes=4096))
    evidence = parse_probe_output("n", streaming.stdout)
    assert len(evidence.ncclras) == 4096 and "ncclras" in evidence.truncated


def test_a_node_without_ncclras_ships_no_ras_and_no_error(tmp_path):
    evidence = parse_probe_output("n", _run_probe_with(tmp_path, _quiet_plan()).stdout)
    assert evidence.status == GATHERED and evidence.ncclras is None
    assert "ncclras" not in evidence.system.get("probe errors", "")
