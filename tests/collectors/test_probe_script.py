"""probe.sh on its own (no SSH): fallbacks for tools that are missing or refuse to run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from analysis.evidence import GATHERED
from collectors.remote import CollectionPlan, parse_probe_output, render_probe

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
