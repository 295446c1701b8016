"""The README's `hangdesk` lines, exactly as written: `pip install .` into a fresh virtualenv
gives a `hangdesk` command that diagnoses an exported bundle with no Django, no database and
no settings, says stuck with its exit status, and refuses a file that is no bundle in one line."""

from __future__ import annotations

import json
import subprocess

from bench.bench_analysis import build_snapshot
from collectors.bundles import write_bundle
from tests.clikit import readme_block


def _run(installed, line: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", line], cwd=installed.checkout, env=installed.env(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_readme_installs_hangdesk_and_it_diagnoses_a_bundle(hangdesk_installed):
    # An exported bundle of 8 ranks on 2 nodes, rank 3 stuck outside the collective.
    (hangdesk_installed.checkout / "bundle.tar.gz").write_bytes(
        write_bundle(build_snapshot(8, 2, stuck_rank=3))
    )
    diagnose = readme_block("tests/cli/test_readme_cli.py")[1]
    done = _run(hangdesk_installed, diagnose)
    assert done.returncode == 1, done.stderr  # stuck
    lines = done.stdout.splitlines()
    assert lines[0] == "A · a rank left or stalled outside the collective  (confidence 0.95)"
    assert lines[2] == "Suspects: rank 3 on node-000"
    assert lines[4] == "Evidence:" and lines[5].startswith("  [stack] node-000 rank 3: ")


def test_the_installed_command_needs_no_django_and_speaks_json_and_markdown(hangdesk_installed):
    hangdesk = hangdesk_installed.bin / "hangdesk"
    (hangdesk_installed.checkout / "bundle.tar.gz").write_bytes(
        write_bundle(build_snapshot(8, 2, stuck_rank=3))
    )
    site = subprocess.run(
        [str(hangdesk_installed.bin / "python"), "-c", "import django"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert site.returncode == 1 and "No module named 'django'" in site.stderr
    as_json = _run(hangdesk_installed, f"{hangdesk} diagnose bundle.tar.gz --json")
    assert json.loads(as_json.stdout)["suspect_ranks"] == [3]
    markdown = _run(hangdesk_installed, f"{hangdesk} diagnose bundle.tar.gz --markdown")
    assert markdown.stdout.startswith("## bundle.tar.gz: A · a rank left or stalled")
    (hangdesk_installed.checkout / "notes.txt").write_text("not a bundle\n")
    refused = _run(hangdesk_installed, f"{hangdesk} diagnose notes.txt")
    assert refused.returncode == 2
    assert refused.stderr.startswith("hangdesk diagnose: bundle refused: this is not an evidence")
    assert refused.stderr.count("\n") == 1
