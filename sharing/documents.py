"""The post-mortem as a document that may leave the console: the written sections of one
version (Markdown, sanitized), the verdict with its evidence, the decisions and overrides,
the pinned timeline and the rank timeline chart, and on request the evidence summary.

Nothing in it is unmasked (hangdesk/masking): what came from a node was masked as the console
stored it, the written sections as they were saved, and the notes and decisions people wrote
are masked here, as they leave. The same document is the console's post-mortem page, its print
page, its Markdown export and the shared page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from analysis.diagnosis import Diagnosis
from analysis.fr_records import FrMismatch
from analysis.records import EnvDiff, NcclConfigDiff, ShellInitLine, StackGroup, records
from analysis.verdict import Quote
from collectors import selectors as snapshot_selectors
from hangdesk.masking import mask_text
from incidents.markdown import render_markdown
from incidents.models import Incident, PostMortem, PostMortemStatus, PostMortemVersion
from incidents.postmortem_draft import decision_words
from incidents.postmortem_text import (
    EDITABLE,
    SECTIONS,
    action_items_markdown,
    code_fence,
)
from incidents.selectors import latest_published, postmortem_decisions
from readings import guide, rank_timeline

from . import frozen

# How much of the evidence a document quotes.
VERDICT_LINES = 8
SUMMARY_LINES = 40
STACK_GROUPS = 12
STACK_FRAMES = 12
ENV_DIFFS = 20


@dataclass(frozen=True)
class Document:
    """Everything the document shows, wherever it is shown (the post-mortem page, the print
    page, the Markdown export, the shared page)."""

    incident: Incident
    postmortem: PostMortem
    version: PostMortemVersion | None  # None: the post-mortem as it stands
    status: str
    number: int
    saved_at: datetime | None
    author: str  # "" on a shared page: no console user names leave
    classification: str
    class_name: str
    sections: list[dict[str, Any]]
    content: dict[str, str]
    verdict: dict[str, Any] | None
    decisions: list[dict[str, Any]]
    pinned: list[dict[str, Any]]
    figure: dict | None
    evidence: EvidenceSummary | None
    frozen_at: datetime | None  # a published version: when its parts were frozen
    evidence_withheld: bool  # a link made without the evidence summary


def document(
    incident: Incident,
    postmortem: PostMortem,
    version: PostMortemVersion | None = None,
    *,
    evidence: bool = False,
    shared: bool = False,
) -> Document:
    """Everything the document shows. `version`: the saved version to show; a published one
    shows what it froze when it was published (sharing/frozen.py), never what the incident
    holds today. Without it, the post-mortem as it stands. `shared` (a share link): the
    verdict, chart and evidence only with `evidence`, and no console user names."""
    content = (
        dict(version.content) if version else {name: getattr(postmortem, name) for name in EDITABLE}
    )
    content = {name: value or "" for name, value in content.items()}  # masked when saved
    if version is not None and version.status == PostMortemStatus.PUBLISHED:
        parts = _typed(frozen.frozen_parts(version, lambda: live_parts(incident)))
    else:
        parts = {**live_parts(incident), "frozen_at": None}
    classification = content.get("classification") or ""
    shows_verdict = evidence or not shared
    people = _anonymous if shared else (lambda row: row)
    return Document(
        incident=incident,
        postmortem=postmortem,
        version=version,
        status=version.status if version else postmortem.status,
        number=version.number if version else postmortem.version,
        saved_at=version.created_at if version else postmortem.updated_at,
        author="" if shared else _name(version.author if version else postmortem.written_by),
        classification=classification,
        class_name=guide.class_name(classification) if classification else "",
        sections=_sections(content),
        content=content,
        verdict=parts["verdict"] if shows_verdict else None,
        decisions=[people(row) for row in parts["decisions"] or []],
        pinned=[people(row) for row in parts["pinned"] or []],
        figure=parts["figure"] if shows_verdict else None,
        evidence=parts["evidence"] if evidence else None,
        frozen_at=parts["frozen_at"],
        evidence_withheld=not shows_verdict,
    )


def live_parts(incident: Incident) -> dict[str, Any]:
    """What the document shows beside the written sections, from the incident as it stands:
    what a published version freezes."""
    # Read as a page reads it: the diagnosis without its per-rank table, the chart from the
    # table's stored overview (a 32,000-rank table is 12 MB of JSON).
    snapshot = snapshot_selectors.latest_diagnosed_snapshot(incident, for_page=True)
    # Masked as it was stored (hangdesk/masking); what people wrote is masked here.
    diagnosis = snapshot.read_diagnosis() if snapshot else None
    ranks = snapshot.read_rank_overview() if diagnosis else None
    return {
        "verdict": _verdict(diagnosis, snapshot) if diagnosis else None,
        "figure": rank_timeline.rank_timeline_figure(diagnosis, ranks) if diagnosis else None,
        "evidence": EvidenceSummary.of(diagnosis) if diagnosis else None,
        "decisions": [_decision(e) for e in postmortem_decisions(incident)],
        "pinned": [
            {
                "at": e.at,
                "kind": e.get_kind_display(),
                "actor": e.actor,
                "person": e.author_id is not None,
                "summary": mask_text(e.summary),
            }
            for e in incident.events.filter(pinned=True).select_related("author").order_by("at")
        ],
    }


def freeze_published(incident: Incident, postmortem: PostMortem) -> None:
    """Freeze the latest published version's document now, if it is not yet (called when a
    version is published)."""
    version = latest_published(postmortem)
    if version is not None and not frozen.is_frozen(version):
        frozen.freeze(version, live_parts(incident))


def _typed(parts: dict[str, Any]) -> dict[str, Any]:
    """Frozen parts as the live ones are: the quoted lines and the evidence summary typed
    again (they were frozen as their JSON)."""
    verdict, summary = parts.get("verdict"), parts.get("evidence")
    if isinstance(verdict, Mapping):
        parts["verdict"] = {**verdict, "lines": records(Quote, verdict.get("lines"))}
    if isinstance(summary, Mapping):
        parts["evidence"] = EvidenceSummary.from_json(summary)
    return parts


def _anonymous(row: dict[str, Any]) -> dict[str, Any]:
    """A note as a share link shows it: a person is "a responder", never their user name."""
    return {**row, "actor": "a responder"} if row.get("person", True) else row


def _name(user) -> str:
    return user.get_username() if user else "—"


def _sections(content: dict[str, str]) -> list[dict[str, Any]]:
    sections = []
    for name, title in SECTIONS:
        text = (content.get(name) or "").strip()
        markdown = action_items_markdown(text) if name == "action_items" else text
        sections.append(
            {"name": name, "title": title, "markdown": markdown, "html": render_markdown(markdown)}
        )
    return sections


def _verdict(d: Diagnosis, snapshot) -> dict[str, Any]:
    return {
        "snapshot": snapshot.pk,
        "at": snapshot.finished_at,
        "classification": d.classification,
        "class_name": guide.class_name(d.classification),
        "confidence": d.confidence,
        "summary": d.summary,
        "world_size": d.world_size,
        "ranks_seen": d.ranks_seen,
        "missing": d.missing_ranks_compact,
        "suspects": d.suspect_ranks_compact,
        "suspect_nodes": list(d.suspect_nodes),
        "last_completed_step": d.last_completed_step,
        "lines": d.evidence[:VERDICT_LINES],
    }


def _decision(event) -> dict[str, Any]:
    details = event.details
    return {
        "at": event.at,
        "actor": event.actor,
        "person": event.author_id is not None,
        "words": mask_text(decision_words(event)),
        "agreed": bool(details.get("agreed")),
        "note": mask_text(details.get("note") or ""),
    }


@dataclass(frozen=True)
class EvidenceSummary:
    """The part of the diagnosis a document quotes on request, bounded."""

    stack_groups: tuple[StackGroup, ...]
    env_diffs: tuple[EnvDiff, ...]
    nccl_config_diffs: tuple[NcclConfigDiff, ...]
    shell_init: tuple[ShellInitLine, ...]
    first_mismatch: FrMismatch | None
    lines: tuple[Quote, ...]

    @classmethod
    def of(cls, d: Diagnosis) -> EvidenceSummary:
        return cls(
            stack_groups=tuple(
                replace(g, stack=g.stack[:STACK_FRAMES]) for g in d.stack_groups[:STACK_GROUPS]
            ),
            env_diffs=d.real_env_diffs[:ENV_DIFFS],
            nccl_config_diffs=d.nccl_config_diffs[:ENV_DIFFS],
            shell_init=d.shell_init[:ENV_DIFFS],
            first_mismatch=d.flight_recorder.first_mismatch if d.flight_recorder else None,
            lines=d.evidence[:SUMMARY_LINES],
        )

    def to_json(self) -> dict[str, Any]:
        first = self.first_mismatch
        return {
            "stack_groups": [g.to_json() for g in self.stack_groups],
            "env_diffs": [x.to_json() for x in self.env_diffs],
            "nccl_config_diffs": [x.to_json() for x in self.nccl_config_diffs],
            "shell_init": [x.to_json() for x in self.shell_init],
            "first_mismatch": first.to_json() if first else None,
            "lines": [e.to_json() for e in self.lines],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvidenceSummary:
        first = data.get("first_mismatch")
        return cls(
            stack_groups=records(StackGroup, data.get("stack_groups")),
            env_diffs=records(EnvDiff, data.get("env_diffs")),
            nccl_config_diffs=records(NcclConfigDiff, data.get("nccl_config_diffs")),
            shell_init=records(ShellInitLine, data.get("shell_init")),
            first_mismatch=FrMismatch.from_json(first) if isinstance(first, Mapping) else None,
            lines=records(Quote, data.get("lines")),
        )


# --- Markdown export ---------------------------------------------------------------------------

_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|&~")


def md_text(text: str) -> str:
    """Plain text (a log line, a note) as Markdown that renders as that text: every character
    Markdown or HTML could act on is backslash-escaped, newlines become spaces."""
    out = []
    for char in str(text).replace("\r", " ").replace("\n", " "):
        out.append("\\" + char if char in _MD_SPECIAL else char)
    return "".join(out)


def _when(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "—"


def document_markdown(doc: Document) -> str:
    """The document as one Markdown file."""
    incident = doc.incident
    lines = [
        f"# Post-mortem {incident.reference}: {md_text(incident.title)}",
        "",
        f"- Cluster: {md_text(incident.cluster.name)} · severity {incident.severity}",
        f"- Status: {doc.status} · version {doc.number} by {md_text(doc.author)}, "
        f"{_when(doc.saved_at)}",
    ]
    if doc.class_name:
        lines.append(f"- Class: {md_text(doc.class_name)}")
    lines.append("")
    by_name = {s["name"]: s for s in doc.sections}
    for name in ("summary", "impact", "detection", "resolution"):
        lines += _md_section(by_name[name])
    lines += _md_verdict(doc.verdict)
    lines += _md_events("Decisions and overrides", doc.decisions, "words")
    lines += _md_events("Pinned timeline", doc.pinned, "summary")
    for name in ("root_cause", "contributing_factors", "action_items"):
        lines += _md_section(by_name[name])
    if doc.evidence:
        lines += _md_evidence(doc.evidence)
    return "\n".join(lines).rstrip() + "\n"


def _md_section(section: dict) -> list[str]:
    return [f"## {section['title']}", "", section["markdown"] or "_Not written._", ""]


def _md_verdict(verdict: dict | None) -> list[str]:
    if not verdict:
        return ["## Verdict", "", "_No snapshot was analysed._", ""]
    lines = [
        "## Verdict",
        "",
        f"**{md_text(verdict['class_name'])}** (confidence {verdict['confidence']}, "
        f"snapshot {verdict['snapshot']}): {md_text(verdict['summary'])}",
        "",
        f"Ranks seen: {verdict['ranks_seen']} of {verdict['world_size']}; last step completed "
        f"by every rank: {verdict['last_completed_step']}.",
        "",
    ]
    if verdict["lines"]:
        quoted = "\n".join(_evidence_line(e) for e in verdict["lines"])
        lines += ["Evidence:", "", code_fence(quoted), ""]
    return lines


def _evidence_line(e: Quote) -> str:
    rank = f"rank {e.rank}" if e.rank is not None else ""
    where = " ".join(p for p in (e.node or "", rank) if p)
    head = f"[{e.kind}] {where}:" if where else f"[{e.kind}]"
    return f"{head} {e.text}"


def _md_events(title: str, events: list[dict], field: str) -> list[str]:
    lines = [f"## {title}", ""]
    if not events:
        return [*lines, "_None._", ""]
    for e in events:
        note = f" — {md_text(e['note'])}" if e.get("note") else ""
        lines.append(f"- {_when(e['at'])} · {md_text(e['actor'])}: {md_text(e[field])}{note}")
    return [*lines, ""]


def _md_evidence(summary: EvidenceSummary) -> list[str]:
    lines = ["## Evidence summary", "", "### Stack groups", ""]
    for g in summary.stack_groups:
        lines.append(f"- ranks {md_text(g.ranks)} ({g.kind}): {md_text(g.frame)}")
    lines += ["", "### Environment differences", ""]
    if not summary.env_diffs:
        lines.append("_Every NCCL\\_/TORCH\\_/CUDA\\_/GLOO\\_ variable is the same on all ranks._")
    for diff in summary.env_diffs:
        values = "; ".join(f"{md_text(v.value)} on ranks {md_text(v.ranks)}" for v in diff.values)
        lines.append(f"- {md_text(diff.name)}: {values}")
    if summary.lines:
        quoted = "\n".join(_evidence_line(e) for e in summary.lines)
        lines += ["", "### Evidence lines", "", code_fence(quoted)]
    return [*lines, ""]
