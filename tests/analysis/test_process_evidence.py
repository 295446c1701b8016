"""Which process evidence can call a rank gone.

A rank is missing only on positive evidence: its node's processes were listed and tied to
ranks, and it is not among them. `ps` alone names processes, not ranks: a node whose
environments could not be read (no permission, a probe stopped early) cannot say which rank
a process is, so its ps rows clear no one and condemn no one.
"""

from __future__ import annotations

import copy

from analysis import diagnose
from tests.analysis.sample_evidence import load_snapshot, pid_of_rank


def _without_environ(snapshot):
    changed = copy.deepcopy(snapshot)
    changed.nodes[0].environ.clear()
    return changed


def test_ps_without_environ_declares_no_rank_gone():
    # Bug (issue 17): every rank whose log named it was "missing", the verdict A.
    result = diagnose(_without_environ(load_snapshot("outside"))).to_json()
    assert result["missing_ranks"] == []


def test_ps_without_environ_keeps_the_ranks_the_logs_show():
    result = diagnose(_without_environ(load_snapshot("outside"))).to_json()
    statuses = {row["rank"]: row["status"] for row in result["per_rank"]}
    assert set(statuses) == {0, 1, 2, 3}
    assert "missing" not in statuses.values()


def test_a_rank_whose_process_is_gone_is_still_missing_when_the_others_have_environ():
    snapshot = copy.deepcopy(load_snapshot("outside"))
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 1)
    node.environ.pop(pid)
    node.pyspy.pop(pid, None)
    node.ps = "\n".join(ln for ln in node.ps.splitlines() if ln.split()[:1] != [str(pid)]) + "\n"
    assert diagnose(snapshot).to_json()["missing_ranks"] == [1]


def test_an_unread_environ_of_a_listed_process_does_not_make_its_rank_missing():
    # ps lists the process, its environ could not be read: which rank it is, nobody knows.
    snapshot = copy.deepcopy(load_snapshot("outside"))
    node = snapshot.nodes[0]
    pid = pid_of_rank(node, 1)
    node.environ.pop(pid)
    node.pyspy.pop(pid, None)
    assert diagnose(snapshot).to_json()["missing_ranks"] == []
