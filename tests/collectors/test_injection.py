"""Plan values are data on the node: quotes, `;`, `$(...)` and backticks never run."""

from __future__ import annotations

from analysis.evidence import GATHERED
from collectors.visits import ssh_visit
from hangdesk.frames import render_probe

HOSTILE = "'; touch {0}/quote #\"; touch {0}/dquote; $(touch {0}/subst) `touch {0}/backtick`"


def test_it_never_executes_a_hostile_pattern_glob_or_py_spy_command(sshd, ranks, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    hostile = HOSTILE.format(canary)
    plan = ranks.plan(
        process_pattern=f"{ranks.pattern}|{hostile}",
        log_globs=[f"/nonexistent/{hostile}", f"{tmp_path}/{hostile}*"],
        flight_recorder_globs=[f"/{hostile}"],
        pyspy_command=f"/nonexistent/py-spy{hostile}",
    )
    evidence = ssh_visit(sshd.target(), plan).evidence
    assert evidence.status == GATHERED, evidence.status
    assert list(canary.iterdir()) == []
    # The pattern still worked as a regular expression: the real ranks were found.
    assert set(ranks.pids) <= set(evidence.environ)
    # The hostile py-spy "command" was looked up as one literal file name, and not found.
    assert all("exited 127" in error for error in evidence.pyspy_errors.values())


def test_it_expands_globs_without_splitting_or_evaluating_file_names(sshd, ranks, tmp_path):
    odd = tmp_path / "rank 0 'x' $(touch y) `z`.log"
    odd.write_text("step=1\n")
    (tmp_path / "rank").write_text("must not match: the glob is one word\n")
    evidence = ssh_visit(
        sshd.target(), ranks.plan(log_globs=[f"{tmp_path}/rank 0 'x' $(touch y)*.log"])
    ).evidence
    assert evidence.logs == {str(odd): "step=1\n"}
    assert not (tmp_path / "y").exists()


def test_the_script_carries_plan_values_only_as_quoted_assignments(ranks):
    script = render_probe(ranks.plan(process_pattern="a'b"), nonce="n").decode()
    assert "HD_PATTERN='a'\"'\"'b'\n" in script
    assert script.index("HD_NONCE=n\n") < script.index("hd_main()")
