"""A straggler needs a measured spread, never a moment (issue 17).

Before: a rank caught outside the collective in both of two snapshots was the straggler. On
the lab's healthy job over SSH that named rank 0 (busy outside the collective in both looks
while every step kept its usual time): two samples of a stack are not a step-time
measurement. Now the probe samples each process for a couple of seconds (py-spy record) and
the straggler is the rank that rarely waits in a collective while the others mostly do; a
moment caught in a dump names no one, whichever way it falls.
"""

from __future__ import annotations

import copy

from analysis import rules
from analysis.facts import build_facts
from analysis.snapshot_parse import parse_snapshot
from tests.analysis.sample_evidence import load_snapshot, pid_of_rank

SLOW = 2  # the recorded sample's straggler (load_batch_slowly)


def _everyone_like_rank(snapshot, rank: int):
    """The same snapshot, every rank's dump replaced by `rank`'s (all caught in load_batch)."""
    changed = copy.deepcopy(snapshot)
    node = changed.nodes[0]
    stack = node.pyspy[pid_of_rank(node, rank)]
    for other in range(4):
        node.pyspy[pid_of_rank(node, other)] = stack
    return changed


def _without_windows(snapshot):
    changed = copy.deepcopy(snapshot)
    changed.nodes[0].pyspy_samples.clear()
    return changed


def _windows_like_rank(snapshot, rank: int):
    changed = copy.deepcopy(snapshot)
    node = changed.nodes[0]
    mine = node.pyspy_samples[pid_of_rank(node, rank)]
    source = str(pid_of_rank(node, rank))
    for other in range(4):
        pid = pid_of_rank(node, other)
        node.pyspy_samples[pid] = mine.replace(f"thread ({source})", f"thread ({pid})")
    return changed


def _facts(current, previous):
    return build_facts(parse_snapshot(current), parse_snapshot(previous))


def _looks():
    return load_snapshot("straggler", "snap0"), load_snapshot("straggler", "snap1")


def test_the_recorded_windows_name_the_straggler():
    earlier, later = _looks()
    verdict = rules.decide(_facts(later, earlier))
    assert verdict.classification == "straggler" and verdict.suspects == (SLOW,)
    assert any(e.kind == "samples" and e.rank == SLOW for e in verdict.evidence)


def test_the_window_names_it_whatever_the_dump_caught():
    # The moment py-spy dumped, every rank was in its data loading: the window still tells.
    earlier, later = _looks()
    verdict = rules.decide(_facts(_everyone_like_rank(later, SLOW), earlier))
    assert verdict.classification == "straggler" and verdict.suspects == (SLOW,)


def test_two_dumps_alone_name_no_straggler():
    # The straggler outside the collective in both dumps, the others in all_reduce: a moment
    # twice. The job progresses: healthy, with the dumps' reading left as an alternative.
    earlier, later = _looks()
    facts = _facts(_without_windows(later), _without_windows(earlier))
    assert facts.outside == (SLOW,)
    assert rules.straggler(facts) is None
    assert rules.decide(facts).classification == "healthy"


def test_windows_in_which_everyone_waits_alike_name_no_one():
    earlier, later = _looks()
    facts = _facts(_windows_like_rank(later, 0), earlier)
    assert rules.straggler(facts) is None
    assert rules.decide(facts).classification == "healthy"


def test_windows_in_which_nobody_waits_name_no_one():
    # Every rank mostly in its own code: no one waits for anyone, so no one is slow.
    earlier, later = _looks()
    facts = _facts(_windows_like_rank(later, SLOW), earlier)
    assert rules.straggler(facts) is None
