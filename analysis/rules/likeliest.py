""" "unknown" is a claim too: only a bundle with no evidence tied to a rank or node earns it.

Anything else gets the likeliest class, weakly, and the one check that would settle it. A
hung job whose lines name no culprit is most often one in which a rank did not come (A): the
ranks that report a timeout are the ones that came and waited. Only when every rank of a
stated world reports waiting in the same collective did everyone come (C).
"""

from __future__ import annotations

from analysis.facts import Facts
from analysis.findings import Finding
from analysis.verdict import Quote, QuoteKind, ranks_text

WEAK = 0.3


def tied_evidence(facts: Facts) -> bool:
    """Does the bundle hold anything that names a rank or a node?"""
    if facts.observed or facts.missing or facts.node_exits or facts.rendezvous_errors:
        return True
    if facts.snap.dumps or facts.snap.watchdog or facts.peer_blames:
        return True
    signals = facts.snap.signals
    if signals.by_rank or signals.by_node or signals.ras_signals:
        return True
    # A line of a node's log that says anything (a step of a local rank no map places, an
    # error naming nobody) is evidence of that node.
    if facts.snap.step_lines or any(
        log.signals or log.errors for _, log in facts.snap.logs_of_note
    ):
        return True
    return any(
        not node.status.gathered
        or node.kernel.oom_kills
        or node.kernel.xids
        or node.kernel.segfaults
        for node in facts.nodes.values()
    )


def likeliest(facts: Facts) -> Finding | None:
    if not tied_evidence(facts):
        return None
    stuck = (facts.watchdog or {}).get("stuck_collective")
    if stuck:
        return _timed_out(facts, stuck)
    step = facts.step_range[1] if facts.step_range else None  # the highest of any rank
    after = f" after step {step}" if step is not None else ""
    if facts.progress.progressing is False:
        lead = f"Nothing moved{after} ({facts.progress.note}) and no line names a culprit."
    else:
        lead = "Nothing here proves the job moving or stuck, and no line names a culprit."
    return Finding(
        "A",
        WEAK - 0.05,
        f"{lead} If it is stuck, the likeliest cause is a rank that did not come to a "
        "collective: take stacks of every rank to see which.",
        evidence=tuple(_observed_lines(facts)),
        check=(
            "py-spy dump of every rank (and its flight-recorder dump): the ranks in a "
            "collective waited for the one that is elsewhere or gone; a second snapshot in a "
            "minute tells slow from dead."
        ),
        rule="likeliest",
    )


def _timed_out(facts: Facts, stuck: dict) -> Finding:
    reporters = sorted({r for _, r, _ in facts.snap.watchdog if r is not None})
    evidence = [Quote(QuoteKind.WATCHDOG, n, r, f.line) for n, r, f in facts.snap.watchdog[:5]]
    what = f"collective #{stuck['seq']} ({stuck['op'] or 'op unknown'})"
    who = ranks_text(reporters) if reporters else "the reporting ranks"
    stated = facts.snap.expected_world_size is not None
    ras_ok = [s for s in facts.snap.signals.ras_signals if s.kind == "ras_ok"]
    if ras_ok:
        return Finding(
            "C",
            WEAK,
            f"The watchdog of {who} fired in {what} while NCCL RAS saw every communicator OK "
            f"({ras_ok[0].text.strip()[:120]}): every rank launched the same operations, so "
            "everyone came, and the collective does not complete. Look at the network and "
            "NCCL's set-up.",
            evidence=(
                *evidence,
                Quote(QuoteKind.RAS_OK, ras_ok[0].node, None, ras_ok[0].text),
            ),
            check=(
                "NCCL WARN lines and `ibstat` / link error counters on the node of "
                f"{who} and its ring neighbours; `ncclras` again: counts frozen mean a hang."
            ),
            rule="likeliest",
        )
    if stated and reporters and set(reporters) >= set(range(facts.world)):
        return Finding(
            "C",
            WEAK,
            f"Every rank ({who}) timed out waiting in {what}: everyone came, and the "
            "collective itself does not finish. Look at the network and NCCL's set-up.",
            evidence=tuple(evidence),
            check=(
                "NCCL_DEBUG=INFO lines (interface, transport, NET plugin) and `ibstat` on every "
                "node, and `env | grep NCCL_` across ranks: what differs between them."
            ),
            rule="likeliest",
        )
    unseen = f"; {ranks_text(facts.unobserved)} left no evidence" if facts.unobserved else ""
    return Finding(
        "A",
        WEAK,
        f"The watchdog of {who} fired in {what}: they came and waited, so the likeliest cause "
        f"is a rank that did not{unseen}. The logs do not say which.",
        evidence=tuple(evidence),
        check=(
            f"py-spy dump of every rank and their flight-recorder dumps: the rank not in {what} "
            "is the one the others wait for."
        ),
        rule="likeliest",
    )


def _observed_lines(facts: Facts) -> list[Quote]:
    if facts.progress.method != "none":
        return [Quote(QuoteKind.PROGRESS, None, None, facts.progress.describe())]
    return []
