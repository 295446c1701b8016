"""A diagnosis as `hangdesk diagnose` prints it: the verdict, its suspects and the evidence first,
then what to check and do, then the rest (stack groups, other readings). Plain text for a
terminal, or Markdown for a ticket or a chat; `--json` prints the diagnosis itself.

Pure: no Django. The exit status says what the verdict means to a script (`exit_status`).
"""

from __future__ import annotations

from analysis.diagnosis import Diagnosis
from readings.guide import class_name

# What a script can test: `hangdesk diagnose B || page-someone`.
EXIT_MOVING = 0  # healthy or a straggler: steps still complete
EXIT_STUCK = 1  # A, B, C or init: the job is stuck
EXIT_USAGE = 2  # a bad command line, or a bundle that cannot be read
EXIT_UNDECIDED = 3  # unknown: the evidence does not decide
STUCK = frozenset({"A", "B", "C", "init"})
MOVING = frozenset({"healthy", "straggler"})

EVIDENCE_SHOWN = 12
GROUPS_SHOWN = 8
LINE_CAP = 300  # one quoted line in a terminal; --json has it whole


def exit_status(diagnosis: Diagnosis) -> int:
    if diagnosis.classification in STUCK:
        return EXIT_STUCK
    if diagnosis.classification in MOVING:
        return EXIT_MOVING
    return EXIT_UNDECIDED


def _cut(text: str, cap: int = LINE_CAP) -> str:
    text = " ".join(text.split())
    return text if len(text) <= cap else text[: cap - 1] + "…"


def _suspects(d: Diagnosis) -> str:
    if not d.suspect_ranks and not d.suspect_nodes:
        return "none named"
    parts = [f"rank{'s' if len(d.suspect_ranks) > 1 else ''} {d.suspect_ranks_compact}"]
    parts = parts if d.suspect_ranks else []
    if d.suspect_nodes:
        parts.append("on " + ", ".join(d.suspect_nodes[:8]))
    return " ".join(parts)


def _ranks_line(d: Diagnosis) -> str:
    parts = [f"{d.ranks_seen} of {d.world_size} ranks seen" if d.world_size else "no ranks"]
    if d.missing_ranks:
        parts.append(f"missing {d.missing_ranks_compact}")
    if d.unobserved_ranks:
        parts.append(f"unobserved {d.unobserved_ranks_compact}")
    if d.last_completed_step is not None:
        parts.append(f"last step every rank completed: {d.last_completed_step}")
    if d.max_step is not None and d.max_step != d.last_completed_step:
        parts.append(f"furthest step: {d.max_step}")
    parts.append(d.progress.note or d.progress.describe())
    return "; ".join(p for p in parts if p)


def _where(node: str | None, rank: int | None) -> str:
    return " ".join(x for x in (node or "", f"rank {rank}" if rank is not None else "") if x)


def text_report(d: Diagnosis) -> str:
    lines = [
        f"{class_name(d.classification)}  (confidence {d.confidence:.2f})",
        d.summary,
        f"Suspects: {_suspects(d)}",
        f"Ranks: {_ranks_line(d)}",
    ]
    if d.evidence:
        lines.append("Evidence:")
        for item in d.evidence[:EVIDENCE_SHOWN]:
            where = _where(item.node, item.rank)
            lines.append(f"  [{item.kind}] {where + ': ' if where else ''}{_cut(item.text)}")
        if len(d.evidence) > EVIDENCE_SHOWN:
            lines.append(f"  … {len(d.evidence) - EVIDENCE_SHOWN} more (--json shows all)")
    if d.check:
        lines.append(f"Check: {d.check}")
    if d.next_steps:
        lines.append("Next:")
        lines += [f"  - {step}" for step in d.next_steps]
    if d.stack_groups:
        lines.append("Stacks:")
        for group in d.stack_groups[:GROUPS_SHOWN]:
            where = f" at {group.location}" if group.location else ""
            plural = "s" if group.rank_count > 1 else ""
            lines.append(f"  rank{plural} {group.ranks}: {group.frame}{where}")
    if d.alternatives:
        lines.append("Other readings:")
        for other in d.alternatives:
            summary = _cut(other.summary)
            lines.append(f"  {other.classification} ({other.confidence:.2f}): {summary}")
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    """Evidence in a Markdown table cell or list item: no pipe, no HTML, no link syntax."""
    for char in "\\`*_[]<>|":
        text = text.replace(char, "\\" + char)
    return text


def markdown_report(d: Diagnosis, *, title: str = "") -> str:
    lines = [
        f"## {_md_escape(title) + ': ' if title else ''}{class_name(d.classification)}",
        "",
        f"**{_md_escape(d.summary)}** (confidence {d.confidence:.2f})",
        "",
        f"- **Suspects**: {_md_escape(_suspects(d))}",
        f"- **Ranks**: {_md_escape(_ranks_line(d))}",
    ]
    if d.check:
        lines.append(f"- **Check**: {_md_escape(d.check)}")
    if d.evidence:
        lines += ["", "### Evidence", "", "| kind | where | line |", "|---|---|---|"]
        for item in d.evidence[:EVIDENCE_SHOWN]:
            where = _md_escape(_where(item.node, item.rank))
            quoted = _cut(item.text).replace("`", "'")
            lines.append(f"| {item.kind} | {where} | `{quoted}` |")
    if d.next_steps:
        lines += ["", "### Next steps", ""]
        lines += [f"{i}. {_md_escape(step)}" for i, step in enumerate(d.next_steps, 1)]
    if d.stack_groups:
        lines += ["", "### Stacks", "", "| ranks | frame | where |", "|---|---|---|"]
        for group in d.stack_groups[:GROUPS_SHOWN]:
            lines.append(
                f"| {group.ranks} | {_md_escape(group.frame)} | {_md_escape(group.location)} |"
            )
    return "\n".join(lines) + "\n"
