"""The lab's straggler on a loaded machine (finding): two snapshots, and in one of them py-spy
caught every rank in its data loading at once (all four in load_batch, no one in all_reduce).

Before: only the latest snapshot could name the slow rank, and a look where nobody waits in a
collective named no one, so the verdict was "healthy" (reproduced on the lab beside two busy
loops: "Training progresses (step 9 -> 12 between snapshots); no rank is stuck."). Must hold:
a rank outside the collective every time we look, while the others waited at least once, is
the straggler, whichever snapshot was the uninformative one; a rank caught busy only once is
not."""

from __future__ import annotations

import copy

from analysis import rules
from analysis.facts import build_facts
from analysis.ranks import parse_snapshot
from tests.analysis.sample_evidence import load_snapshot, pid_of_rank

SLOW = 2  # the recorded sample's straggler (load_batch_slowly)


def _everyone_like_rank(snapshot, rank: int):
    """The same snapshot, every rank's stack replaced by `rank`'s (all caught in load_batch)."""
    changed = copy.deepcopy(snapshot)
    node = changed.nodes[0]
    stack = node.pyspy[pid_of_rank(node, rank)]
    for other in range(4):
        node.pyspy[pid_of_rank(node, other)] = stack
    return changed


def _facts(current, previous):
    return build_facts(parse_snapshot(current), parse_snapshot(previous))


def test_the_recorded_pair_names_the_straggler():
    earlier, later = load_snapshot("straggler", "snap0"), load_snapshot("straggler", "snap1")
    facts = _facts(later, earlier)
    assert facts.outside == (SLOW,) and facts.in_collective == (0, 1, 3)
    verdict = rules.straggler(facts)
    assert verdict.classification == "straggler" and verdict.suspects == (SLOW,)


def test_a_latest_look_with_everyone_loading_data_still_names_it():
    earlier, later = load_snapshot("straggler", "snap0"), load_snapshot("straggler", "snap1")
    facts = _facts(_everyone_like_rank(later, SLOW), earlier)
    assert facts.in_collective == () and len(facts.outside) == 4  # the uninformative look
    verdict = rules.straggler(facts)
    assert verdict.classification == "straggler", verdict.summary
    assert verdict.suspects == (SLOW,)


def test_an_earlier_look_with_everyone_loading_data_still_names_it():
    earlier, later = load_snapshot("straggler", "snap0"), load_snapshot("straggler", "snap1")
    verdict = rules.straggler(_facts(later, _everyone_like_rank(earlier, SLOW)))
    assert verdict.classification == "straggler" and verdict.suspects == (SLOW,)


def test_a_rank_caught_busy_once_is_not_a_straggler():
    # The slow rank in all_reduce like the others in the earlier look: it was not slow every time.
    earlier, later = load_snapshot("straggler", "snap0"), load_snapshot("straggler", "snap1")
    verdict = rules.decide(_facts(later, _everyone_like_rank(earlier, 0)))
    assert verdict.classification == "healthy", verdict.summary


def test_two_looks_without_any_collective_name_no_one():
    earlier, later = load_snapshot("straggler", "snap0"), load_snapshot("straggler", "snap1")
    facts = _facts(_everyone_like_rank(later, SLOW), _everyone_like_rank(earlier, SLOW))
    assert rules.decide(facts).classification == "healthy"
