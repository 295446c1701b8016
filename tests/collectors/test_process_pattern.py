"""The default process pattern, checked with the awk the probe uses."""

from __future__ import annotations

import re
import subprocess

import pytest

from clusters.sshspec import DEFAULT_PROCESS_PATTERN, validate_process_pattern
from hangdesk.frames import PROBE_PATH

TRAINING = [
    "/usr/bin/python3 /opt/venv/bin/torchrun --nproc-per-node 8 train.py",
    "python -u /workspace/Megatron-LM/pretrain_gpt.py --tensor-model-parallel-size 2",
    "/usr/bin/python -m torch.distributed.run --nnodes 4 finetune.py",
    "python -m torch.distributed.launch --use-env main.py",
    "python /work/megatron/training.py",
    "python3 my_train.py --lr 3e-4",
    "python /srv/jobs/train_llama.py",
]
OTHERS = [
    "/usr/sbin/sshd -D",
    "python3 -m http.server",
    "bash -c tail -f /var/log/syslog",
    "python /srv/jobs/eval.py",
]


def _awk_matches(lines: list[str]) -> list[str]:
    result = subprocess.run(
        ["awk", '$0 ~ ENVIRON["HD_PATTERN"]'],
        input="\n".join(lines) + "\n",
        env={"HD_PATTERN": DEFAULT_PROCESS_PATTERN, "LC_ALL": "C"},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    return result.stdout.splitlines()


def test_the_default_pattern_matches_launchers_and_training_scripts_only():
    assert _awk_matches(TRAINING + OTHERS) == TRAINING
    assert [line for line in TRAINING + OTHERS if re.search(DEFAULT_PROCESS_PATTERN, line)] == (
        TRAINING
    )


def test_the_probe_uses_the_same_default_pattern():
    # probe.sh runs standalone with its own defaults; they must not drift from Python's.
    assert f"HD_PATTERN='{DEFAULT_PROCESS_PATTERN}'" in PROBE_PATH.read_text()


@pytest.mark.parametrize("pattern", [r"rank\d+", r"(?:torchrun|train)", r"train.*?py", r"\btrain"])
def test_it_refuses_python_only_regex_syntax_the_node_cannot_run(pattern):
    with pytest.raises(ValueError, match="POSIX extended regex"):
        validate_process_pattern(pattern)


@pytest.mark.parametrize("pattern", ["", "a\nb", "train(", "(unclosed"])
def test_it_refuses_broken_patterns(pattern):
    with pytest.raises(ValueError):
        validate_process_pattern(pattern)


def test_it_accepts_posix_patterns():
    assert validate_process_pattern(r"train[.]py --job [0-9]+") == r"train[.]py --job [0-9]+"
