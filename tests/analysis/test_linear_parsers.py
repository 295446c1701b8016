"""Every parser is linear on a 1 MB line, whatever the line holds.

The lines come from the parsers' own regexes (tests/analysis/adversarial_lines.py): for each
regex, its literals around long runs of what its repetitions accept. The review found one
256 KiB log line that took 196 s and 2,000 spaces of nvidia-smi that took 50 s; a quadratic
regex on a 1 MB line takes hours. All of them run in one child under RLIMIT_CPU: no per-line
timing is asserted, only that the whole set finishes within a budget a linear parser meets
many times over (about a minute here, on a shared 2-core machine).
"""

import json

import pytest

from tests import hostile

LINE_BYTES = 1 << 20

_RUN_ALL = """
import json, sys, time
from analysis.parsers.dmesg import parse_dmesg
from analysis.parsers.environ import parse_environ
from analysis.parsers.logs import parse_log
from analysis.parsers.nvidia_smi import parse_nvidia_smi
from analysis.parsers.ps import parse_ps
from analysis.parsers.pyspy import parse_pyspy
from analysis.parsers.shell_init import parse_shell_init
from analysis.parsers.ncclras import parse_ncclras
from hangdesk.masking import mask_text
from analysis.signals import LineSource, read_text
from hangdesk.frames import parse_probe_output
from tests.analysis.adversarial_lines import FILLERS, adversarial_lines

size = int(sys.argv[1])
source = LineSource("logs/job-worker-3.log", "n0")
thread = 'Thread 7 (active): "MainThread"\\n'
readers = {
    "logs": ([
        "analysis.parsers.logs", "analysis.parsers.launchers", "analysis.parsers.nccl",
        "analysis.snapshot_parse",
    ], [lambda line: parse_log("/var/log/train/rank0.log", line)]),
    "dmesg": (["analysis.parsers.dmesg"], [parse_dmesg]),
    "pyspy": (["analysis.parsers.pyspy"], [parse_pyspy, lambda line: parse_pyspy(thread + line)]),
    "shell_init": (["analysis.parsers.shell_init"], [parse_shell_init]),
    "secrets": (["hangdesk.masking.text"], [mask_text]),
    "signals": ([
        "analysis.signals.who", "analysis.signals.kinds", "analysis.signals.comms",
        "analysis.signals.cluster", "analysis.signals.triggers", "analysis.signals.progress",
        "analysis.signals.times", "analysis.signals.nodes", "analysis.signals.blocks",
        "analysis.signals.reader", "analysis.parsers.ncclras", "analysis.parsers.ncclras_text",
    ], [lambda line: read_text("Traceback (most recent call last):\\n" + line, source),
        lambda line: read_text("Group     Comms\\n" + line + "\\n\\n#0-0 (ab) ERROR\\n" + line),
        lambda line: parse_ncclras('{"communicators": [' + line)]),
    "probe": (["hangdesk.frames"], [lambda line: parse_probe_output("n", line.encode())]),
}
every = [lambda line: parse_log("/x/rank1.log", line),
         parse_dmesg, parse_pyspy, parse_nvidia_smi, parse_ps, parse_shell_init,
         lambda line: parse_environ(line.encode()), mask_text, read_text, parse_ncclras]
report = {}
for name, (modules, parsers) in readers.items():
    count, worst, began = 0, 0.0, time.process_time()
    for _pattern, line in adversarial_lines(modules, size):
        for parse in parsers:
            start = time.process_time()
            parse(line)
            worst = max(worst, time.process_time() - start)
            count += 1
    report[name] = {"lines": count, "cpu_s": round(time.process_time() - began, 1),
                    "worst_line_s": round(worst, 3)}
began = time.process_time()
for filler in FILLERS:  # plain runs through every parser (2,000 spaces took nvidia-smi 50 s)
    line = (filler * (size // len(filler)))[:size]
    for parse in every:
        parse(line)
report["runs_through_every_parser"] = {"lines": len(FILLERS) * len(every),
                                       "cpu_s": round(time.process_time() - began, 1)}
print(json.dumps(report))
"""


@pytest.mark.slow
def test_every_parser_reads_adversarial_1mb_lines_in_linear_time():
    done = hostile.run_limited(_RUN_ALL, str(LINE_BYTES), cpu_seconds=400, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    print(json.dumps(report, indent=1))  # the figures docs/reliability.md quotes (pytest -s)
    assert report["logs"]["lines"] > 500 and report["dmesg"]["lines"] > 50
    assert report["signals"]["lines"] > 500
    assert all(entry["lines"] > 0 for entry in report.values())
