"""The post-mortem as a document that may leave the console: the written sections of one
version (Markdown, sanitized), the verdict with its evidence, the decisions and overrides,
the pinned timeline and the rank timeline chart, and on request the evidence summary.

Every value that came from a node goes through analysis/secrets.py first, and so does every
line a person wrote: the same document is the console's post-mortem page, its print page,
its Markdown export and the shared page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import analysis
from analysis import guide
from analysis.secrets import mask_json, mask_text
from collectors import selectors as snapshot_selectors
from incidents.markdown import render_markdown
from incidents.models import Incident, PostMortem, PostMortemVersion
from incidents.postmortem_text import (
    EDITABLE,
    SECTIONS,
    action_items_markdown,
    code_fence,
)
from incidents.postmortems import decision_words, postmortem_decisions

# How much of the evidence a document quotes.
VERDICT_LINES = 8
SUMMARY_LINES = 40
STACK_GROUPS = 12
STACK_FRAMES = 12
ENV_DIFFS = 20


def document(
    incident: Incident,
    postmortem: PostMortem,
    version: PostMortemVersion | None = None,
    *,
    evidence: bool = False,
) -> dict[str, Any]:
    """Everything the document shows. `version`: the saved version to show (the shared page
    shows the latest published one); without it, the post-mortem as it stands."""
    content = (
        dict(version.content) if version else {name: getattr(postmortem, name) for name in EDITABLE}
    )
    content = {name: mask_text(value or "") for name, value in content.items()}
    snapshot = snapshot_selectors.latest_diagnosed_snapshot(incident)
    diagnosis = mask_json(snapshot.diagnosis) if snapshot and snapshot.diagnosis else None
    classification = content.get("classification") or ""
    return {
        "incident": incident,
        "postmortem": postmortem,
        "version": version,
        "status": version.status if version else postmortem.status,
        "number": version.number if version else postmortem.version,
        "saved_at": version.created_at if version else postmortem.updated_at,
        "author": _name(version.author if version else postmortem.written_by),
        "classification": classification,
        "class_name": guide.class_name(classification) if classification else "",
        "sections": _sections(content),
        "content": content,
        "verdict": _verdict(diagnosis, snapshot) if diagnosis else None,
        "decisions": [_decision(e) for e in postmortem_decisions(incident)],
        "pinned": [
            {
                "at": e.at,
                "kind": e.get_kind_display(),
                "actor": e.actor,
                "summary": mask_text(e.summary),
            }
            for e in incident.events.filter(pinned=True).select_related("author").order_by("at")
        ],
        "figure": analysis.timeline_figure(analysis.Diagnosis.from_json(diagnosis))
        if diagnosis
        else None,
        "evidence": _evidence_summary(diagnosis) if evidence and diagnosis else None,
    }


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


def _verdict(d: dict, snapshot) -> dict[str, Any]:
    return {
        "snapshot": snapshot.pk,
        "at": snapshot.finished_at,
        "classification": d.get("classification", ""),
        "class_name": guide.class_name(d.get("classification", "")),
        "confidence": d.get("confidence"),
        "summary": d.get("summary", ""),
        "world_size": d.get("world_size"),
        "ranks_seen": d.get("ranks_seen"),
        "missing": d.get("missing_ranks_compact", ""),
        "suspects": d.get("suspect_ranks_compact", ""),
        "suspect_nodes": d.get("suspect_nodes") or [],
        "last_completed_step": d.get("last_completed_step"),
        "lines": (d.get("evidence") or [])[:VERDICT_LINES],
    }


def _decision(event) -> dict[str, Any]:
    details = event.details
    return {
        "at": event.at,
        "actor": event.actor,
        "words": mask_text(decision_words(event)),
        "agreed": bool(details.get("agreed")),
        "note": mask_text(details.get("note") or ""),
    }


def _evidence_summary(d: dict) -> dict[str, Any]:
    groups = []
    for g in (d.get("stack_groups") or [])[:STACK_GROUPS]:
        groups.append({**g, "stack": (g.get("stack") or [])[:STACK_FRAMES]})
    return {
        "stack_groups": groups,
        "env_diffs": [x for x in d.get("env_diffs") or [] if not x.get("expected_per_rank")][
            :ENV_DIFFS
        ],
        "nccl_config_diffs": (d.get("nccl_config_diffs") or [])[:ENV_DIFFS],
        "shell_init": (d.get("shell_init") or [])[:ENV_DIFFS],
        "first_mismatch": (d.get("flight_recorder") or {}).get("first_mismatch"),
        "lines": (d.get("evidence") or [])[:SUMMARY_LINES],
    }


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


def document_markdown(doc: dict[str, Any]) -> str:
    """The document as one Markdown file."""
    incident = doc["incident"]
    lines = [
        f"# Post-mortem {incident.reference}: {md_text(incident.title)}",
        "",
        f"- Cluster: {md_text(incident.cluster.name)} · severity {incident.severity}",
        f"- Status: {doc['status']} · version {doc['number']} by {md_text(doc['author'])}, "
        f"{_when(doc['saved_at'])}",
    ]
    if doc["class_name"]:
        lines.append(f"- Class: {md_text(doc['class_name'])}")
    lines.append("")
    by_name = {s["name"]: s for s in doc["sections"]}
    for name in ("summary", "impact", "detection", "resolution"):
        lines += _md_section(by_name[name])
    lines += _md_verdict(doc["verdict"])
    lines += _md_events("Decisions and overrides", doc["decisions"], "words")
    lines += _md_events("Pinned timeline", doc["pinned"], "summary")
    for name in ("root_cause", "contributing_factors", "action_items"):
        lines += _md_section(by_name[name])
    if doc["evidence"]:
        lines += _md_evidence(doc["evidence"])
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


def _evidence_line(e: dict) -> str:
    rank = f"rank {e['rank']}" if e.get("rank") is not None else ""
    where = " ".join(p for p in (e.get("node") or "", rank) if p)
    head = f"[{e.get('kind')}] {where}:" if where else f"[{e.get('kind')}]"
    return f"{head} {e.get('text')}"


def _md_events(title: str, events: list[dict], field: str) -> list[str]:
    lines = [f"## {title}", ""]
    if not events:
        return [*lines, "_None._", ""]
    for e in events:
        note = f" — {md_text(e['note'])}" if e.get("note") else ""
        lines.append(f"- {_when(e['at'])} · {md_text(e['actor'])}: {md_text(e[field])}{note}")
    return [*lines, ""]


def _md_evidence(summary: dict) -> list[str]:
    lines = ["## Evidence summary", "", "### Stack groups", ""]
    for g in summary["stack_groups"]:
        frame = md_text(g.get("frame", ""))
        lines.append(f"- ranks {md_text(g['ranks'])} ({g.get('kind')}): {frame}")
    lines += ["", "### Environment differences", ""]
    if not summary["env_diffs"]:
        lines.append("_Every NCCL\\_/TORCH\\_/CUDA\\_/GLOO\\_ variable is the same on all ranks._")
    for diff in summary["env_diffs"]:
        values = "; ".join(
            f"{md_text(v.get('value', ''))} on ranks {md_text(v.get('ranks', ''))}"
            for v in diff.get("values") or []
        )
        lines.append(f"- {md_text(diff.get('name', ''))}: {values}")
    if summary["lines"]:
        quoted = "\n".join(_evidence_line(e) for e in summary["lines"])
        lines += ["", "### Evidence lines", "", code_fence(quoted)]
    return [*lines, ""]
