"""Proof of progress (healthy), and a snapshot with nothing in it."""

from __future__ import annotations

from analysis import quotes
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.rules.likeliest import tied_evidence
from analysis.verdict import Quote, QuoteKind


def no_evidence(facts: Facts) -> Finding | None:
    """ "unknown", the one claim of this kind: nothing in the bundle names a rank or node."""
    if tied_evidence(facts):
        return None
    return Finding(
        "unknown",
        0.0,
        "Nothing in this snapshot names a rank or a node: no process, stack, step, error line, "
        "flight-recorder dump or kernel event was found.",
        check="Check the cluster's process pattern and log globs: the probe found no training "
        "process and no log on any node.",
        rule="none",
    )


def moving(facts: Facts) -> Finding | None:
    """Proof of progress: healthy, unless a stuck signal says otherwise (the combiner's call)."""
    if not facts.progress.progressing:
        return None
    real = [d for d in facts.env_diffs if not d["expected_per_rank"]]
    note = ""
    evidence = [quotes.progress(facts.progress)]
    if real:
        note = f" Environment differs across ranks ({real[0]['name']}): fix it before it bites."
        evidence += [Quote(QuoteKind.ENV_DIFF, None, None, quotes.diff_text(d)) for d in real[:3]]
    two = facts.progress.method == "two_snapshots"
    return Finding(
        "healthy",
        0.85 if two else 0.6,
        f"Training progresses ({facts.progress.describe()}); no rank is stuck.{note}",
        evidence=tuple(evidence),
        check=(
            "Nothing to confirm: the steps advanced between the two looks."
            if two
            else "A second snapshot in a minute: the last step should have advanced again."
        ),
        rule="moving",
    )
