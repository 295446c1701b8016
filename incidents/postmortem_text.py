"""A post-mortem's written sections as text: their order and titles, the action items' line
format, the Markdown a version reads as, and the diff between two versions. No models here
(models.py reads the action items through this module)."""

from __future__ import annotations

import difflib
from datetime import date

# The sections a responder writes, in the order a reader meets them.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("summary", "Summary"),
    ("impact", "Impact"),
    ("detection", "Detection and response"),
    ("resolution", "Resolution"),
    ("root_cause", "Root cause"),
    ("contributing_factors", "Contributing factors"),
    ("action_items", "Action items"),
)
# Every field a save may change and a version keeps.
EDITABLE = ("classification", *(name for name, _ in SECTIONS))

# Past this many lines an action-item list is not read further (a pasted log is not a plan).
MAX_ACTION_ITEMS = 200
# Each written section is at most this long (the form says so before the renderer sees it).
MAX_SECTION_CHARS = 20_000


def parse_action_items(text: str) -> list[dict]:
    """One action item a line: `what | owner | YYYY-MM-DD` (owner and date may be left out).
    A leading list marker (`-`, `*`, `- [ ]`) is dropped. Each row: what, owner, due (a date
    or None), due_text as written, and problem (why the row is not ready, or "")."""
    rows = []
    for line in text.splitlines():
        line = _without_marker(line.strip())
        if not line:
            continue
        what, _, rest = line.partition("|")
        owner, _, due_text = rest.partition("|")
        owner, due_text = owner.strip(), due_text.strip()
        due, problem = _due_date(due_text)
        if not owner:
            problem = problem or "no owner"
        rows.append(
            {
                "what": what.strip(),
                "owner": owner,
                "due": due,
                "due_text": due_text,
                "problem": problem,
            }
        )
        if len(rows) >= MAX_ACTION_ITEMS:
            break
    return rows


def _without_marker(line: str) -> str:
    for marker in ("- [ ] ", "- [x] ", "* [ ] ", "- ", "* ", "+ "):
        if line.startswith(marker):
            return line[len(marker) :].strip()
    return line


def _due_date(text: str) -> tuple[date | None, str]:
    if not text:
        return None, "no due date"
    try:
        return date.fromisoformat(text), ""
    except ValueError:
        return None, f"due date {text[:40]!r} is not YYYY-MM-DD"


def action_item_line(what: str, owner: str = "", due: date | None = None) -> str:
    return " | ".join([what, owner, due.isoformat() if due else ""]).rstrip(" |")


def action_items_markdown(text: str) -> str:
    """The action items as a Markdown table (what, owner, due)."""
    rows = parse_action_items(text)
    if not rows:
        return "_None._"
    lines = ["| Action | Owner | Due |", "|---|---|---|"]
    for row in rows:
        cells = [row["what"], row["owner"] or "—", row["due_text"] or "—"]
        lines.append("| " + " | ".join(_table_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _table_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def content_markdown(content: dict, *, classification_label: str = "") -> str:
    """The written sections of one version as Markdown: what a diff compares and what the
    Markdown export carries between the incident's own sections."""
    parts = []
    if content.get("classification"):
        label = classification_label or content["classification"]
        parts.append(f"**Class:** {label}\n")
    for name, title in SECTIONS:
        text = (content.get(name) or "").strip()
        if name == "action_items":
            text = action_items_markdown(text)
        parts.append(f"## {title}\n\n{text or '_Not written._'}\n")
    return "\n".join(parts)


def version_diff(old: str, new: str, *, context: int = 2) -> list[dict]:
    """A readable line diff: one row per line with kind `hunk`, `add`, `del` or `same`."""
    rows = []
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), lineterm="", n=context, fromfile="a", tofile="b"
    )
    for line in lines:
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            rows.append({"kind": "hunk", "text": line})
        elif line.startswith("+"):
            rows.append({"kind": "add", "text": line[1:]})
        elif line.startswith("-"):
            rows.append({"kind": "del", "text": line[1:]})
        else:
            rows.append({"kind": "same", "text": line[1:]})
    return rows


def code_fence(text: str) -> str:
    """`text` as a fenced code block no backtick run inside it can close."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"
