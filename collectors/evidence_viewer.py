"""The evidence viewer: which lines of an artifact the verdict quotes, and which stored
artifact holds a quoted line. Only `str` containment, no regex: artifacts are untrusted text
of up to several MiB. The view (collectors.views.artifact_raw) decides who reads what and
masks; the functions here get the text it decided to show."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from django.utils.html import format_html, format_html_join

from analysis.jobtime import line_before_job
from analysis.verdict import Quote
from hangdesk.masking import masked_artifact_text

from .models import Artifact, Snapshot, inflate

# A page shows at most this many lines, each cut at LINE_CHARS (the download has them all).
MAX_LINES = 20_000
LINE_CHARS = 2_000
# Quotes shorter than this would mark half the file ("OK", "0").
MIN_QUOTE_CHARS = 6
# Kinds whose text is a line as the node wrote it (others are the analysis's own words:
# "rank 3: its process is gone", a formatted frame, an environment diff).
LITERAL_KINDS = frozenset(
    {
        "dmesg_oom",
        "exit_code",
        "log_error",
        "nccl_config",
        "nccl_peer",
        "nccl_warn",
        "rendezvous",
        "segfault",
        "shell_init",
        "slow_rank",
        "step_time",
        "watchdog",
        "xid",
    }
)


def quote_core(text: str) -> str:
    """The part of a quote that appears verbatim in the artifact: an Xid's "  [meaning]"
    annotation is the analysis's, not the node's."""
    return text.split("  [", 1)[0].strip()


def usable_quotes(evidence: Iterable[Quote], node: str) -> list[tuple[int, str]]:
    """(index in the diagnosis's evidence, verbatim core) of this node's literal quotes."""
    out = []
    for index, item in enumerate(evidence):
        if item.node != node or item.kind not in LITERAL_KINDS:
            continue
        core = quote_core(item.text)
        if len(core) >= MIN_QUOTE_CHARS:
            out.append((index, core))
    return out


def is_linkable(item: Quote) -> bool:
    return bool(item.node) and item.kind in LITERAL_KINDS


def quoted_line_numbers(lines: list[str], quotes: list[tuple[int, str]]) -> dict[int, int]:
    """1-based line number -> the evidence index it quotes (the first quote that matches)."""
    found: dict[int, int] = {}
    if not quotes:
        return found
    for number, line in enumerate(lines, start=1):
        for index, core in quotes:
            if core in line:
                found[number] = index
                break
    return found


def first_line_with(text: str, core: str) -> int | None:
    """1-based number of the first line containing `core`, or None."""
    at = text.find(core)
    if at < 0:
        return None
    return text.count("\n", 0, at) + 1


@dataclass
class Page:
    rows: str  # escaped HTML of the table rows
    lines_total: int
    lines_shown: int
    cut_lines: int  # lines shortened to LINE_CHARS
    quoted: dict[int, int]
    before_job: int = 0  # lines stamped before the job began


def render_lines(
    text: str,
    quotes: list[tuple[int, str]],
    *,
    job_started: datetime | None = None,
    now: datetime | None = None,
) -> Page:
    """The artifact as table rows: a line number that links to itself, the line, the
    verdict's quoted lines marked (class "quoted", with the evidence index), and the lines
    stamped before the job began marked "before-job" (analysis/jobtime.py: an earlier run's,
    never quoted)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    lines = lines[:MAX_LINES]
    quoted = quoted_line_numbers(lines, quotes)
    cut = 0
    shown = []
    old = set()
    for number, line in enumerate(lines, start=1):
        if job_started is not None and line_before_job(line, job_started, now):
            old.add(number)
        if len(line) > LINE_CHARS:
            line, cut = line[:LINE_CHARS] + " …", cut + 1
        shown.append((number, line))
    rows = format_html_join(
        "\n",
        '<tr id="L{}"{}><td class="ln"><a href="#L{}">{}</a></td><td class="tx">{}</td></tr>',
        ((n, _row_attributes(n, quoted, old), n, n, line) for n, line in shown),
    )
    return Page(rows, total, len(lines), cut, quoted, len(old))


def _row_attributes(number: int, quoted: dict[int, int], old: set[int]) -> str:
    if number in quoted:
        classes = "quoted before-job" if number in old else "quoted"
        return format_html(' class="{}" data-quote="{}"', classes, quoted[number])
    if number in old:
        return format_html(' class="before-job" title="{}"', "older than the job: an earlier run's")
    return ""


def _evidence(snapshot: Snapshot) -> tuple[Quote, ...]:
    diagnosis = snapshot.read_diagnosis()
    return diagnosis.evidence if diagnosis else ()


# A quote is looked for in at most this much of a node's stored text.
LOCATE_BUDGET_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ArtifactPage:
    """The evidence viewer's page of one artifact: its lines numbered (the verdict's quotes
    and the lines from before the job marked) and the quotes found in it."""

    artifact: Artifact
    snapshot: Snapshot
    node: str
    page: Page
    job_started: datetime | None
    raw: bool  # shown as collected, not masked (asked for and audited)
    quotes: list[dict]  # {"index", "text", "kind", "line"}, in line order
    line: int | None  # the line a quote of the verdict opened the page on

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def artifact_page(
    artifact: Artifact, text: str, *, raw: bool, line: int | None = None
) -> ArtifactPage:
    """What the viewer page shows of one artifact (its text already masked or not); the
    artifact with its collection and snapshot: no query."""
    collection = artifact.collection
    snapshot = collection.snapshot
    diagnosis = snapshot.read_diagnosis()
    evidence = diagnosis.evidence if diagnosis else ()
    quotes = usable_quotes(evidence, collection.node_name)
    started = diagnosis.job_started_at if diagnosis else None
    now = (diagnosis.collected_at if diagnosis else None) or snapshot.finished_at
    page = render_lines(text, quotes, job_started=started, now=now)
    return ArtifactPage(
        artifact=artifact,
        snapshot=snapshot,
        node=collection.node_name,
        page=page,
        job_started=started,
        raw=raw,
        quotes=[
            {"index": i, "text": evidence[i].text, "kind": evidence[i].kind, "line": n}
            for n, i in sorted(page.quoted.items())
        ],
        line=line,
    )


def with_page_snapshot(artifact: Artifact) -> Artifact:
    """The artifact (with its collection) given its snapshot as a page reads it: the
    diagnosis without its per-rank table (the viewer needs its quotes and times; the whole
    table is 12 MB of JSON at 32,000 ranks). One query."""
    artifact.collection.snapshot = (
        Snapshot.objects.for_pages().select_related("incident").get(pk=artifact.collection.snapshot_id)
    )  # fmt: skip
    return artifact


def artifact_quoting(snapshot: Snapshot, index: int) -> tuple[Artifact, int] | None:
    """The stored artifact (of the quoting node, in name order) holding the verdict's
    evidence line `index`, and the line's number. Searched in the masked text, which is
    what the stored (masked) diagnosis quotes."""
    evidence = _evidence(snapshot)
    if not 0 <= index < len(evidence) or not is_linkable(evidence[index]):
        return None
    item = evidence[index]
    core = quote_core(item.text)
    if len(core) < MIN_QUOTE_CHARS:
        return None
    candidates = (
        Artifact.objects.filter(collection__snapshot=snapshot, collection__node_name=item.node)
        .select_related("collection")
        .order_by("name")
    )
    budget = LOCATE_BUDGET_BYTES
    for artifact in candidates.iterator(chunk_size=50):
        text = masked_artifact_text(artifact.name, inflate(artifact.compressed))
        budget -= len(text)
        line = first_line_with(text, core)
        if line is not None:
            artifact.collection.snapshot = snapshot  # as the caller read it
            return artifact, line
        if budget <= 0:
            break
    return None
