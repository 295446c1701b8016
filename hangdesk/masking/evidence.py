"""Collected evidence as a person or an export may see it: every piece through text.py (by
variable name in environments, by shape everywhere else).

Flight-recorder pickles stay as they are: they hold collective records and stack frames (no
environment, no command line), and masking inside a pickle would need unpickling it; JSON
dumps are text and are masked like the rest.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import chain, repeat
from operator import eq, itemgetter

from analysis.diagnosis import Diagnosis
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.records import RankStatus
from hangdesk import evidence_kinds as kinds
from hangdesk.evidence_kinds import EvidenceKind, as_text

from .text import mask_json, mask_text


def mask_piece(kind: EvidenceKind, content: str | bytes) -> str | bytes:
    """One piece of evidence, masked, in the type it came in (bytes for binary kinds)."""
    if isinstance(content, str):
        return mask_text(content)
    text = as_text(content)
    if kind is kinds.FLIGHT_RECORDER and not text.lstrip().startswith(("{", "[")):
        return content  # a pickle: see the module's docstring
    return mask_text(text).encode()


def masked_node(node: NodeEvidence) -> NodeEvidence:
    masked = replace(node, truncated=list(node.truncated))
    for kind in kinds.KINDS:
        value = getattr(node, kind.field)
        if kind.key:
            setattr(masked, kind.field, {k: mask_piece(kind, v) for k, v in value.items()})
        elif value is not None:
            setattr(masked, kind.field, mask_piece(kind, value))
    masked.status = replace(node.status, note=mask_text(node.status.note))
    return masked


def masked_snapshot(evidence: SnapshotEvidence) -> SnapshotEvidence:
    return replace(evidence, nodes=[masked_node(node) for node in evidence.nodes])


def masked_diagnosis(diagnosis: Diagnosis) -> dict:
    """A diagnosis as it may be stored and shown: its JSON with every secret masked (the
    per-rank table by its rows' shape: `masked_rank_rows`)."""
    data = diagnosis.to_json()
    rows = data.get("per_rank")
    if not isinstance(rows, list):
        return mask_json(data)
    rest = mask_json({**data, "per_rank": []})
    # The rows are this call's own (to_json made them): kept as they are where nothing in
    # them is masked (copying 32,000 of them, then freeing the originals, cost 0.03 s).
    rest["per_rank"] = _masked_rows(rows, copied=False)
    return rest


# A per-rank row's fields the console makes itself: numbers and a flag, its status (an enum),
# the time of its last step (datetime.isoformat) and its stack's hash (12 hex digits). A
# 32,000-rank table holds 400,000 of them, no secret can be in one, and each is checked to
# have that shape; the rest (node, frame, state: read from evidence) is masked, each distinct
# value once. A row of any other shape (a field added later) is masked whole.
_ROW_NUMBERS = ("rank", "pid", "local_rank", "suspect", "last_step", "step_time",
                "stack_group", "exit_code", "gpu_util")  # fmt: skip
_ROW_TEXTS = ("node", "frame", "state")
_ROW_KEYS = frozenset((*_ROW_NUMBERS, *_ROW_TEXTS, "status", "last_step_at", "stack_signature"))
_numbers = itemgetter(*_ROW_NUMBERS)
_PLAIN = frozenset({int, float, bool, type(None)})
_STATUSES = frozenset(str(status) for status in RankStatus)
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:[+-]\d\d:\d\d)?")
_HASH = re.compile(r"[0-9a-f]{0,40}")


def masked_rank_rows(rows: list) -> list:
    """The per-rank table (`RankRow.to_json()` rows) with every secret masked (new rows:
    the ones given are left as they are)."""
    return _masked_rows(rows, copied=True)


def _masked_rows(rows: list, *, copied: bool) -> list:
    """`masked_rank_rows`; `copied` False: a row with nothing to mask may be the one given."""
    if _all_made_here(rows):
        texts = list(chain.from_iterable(map(_texts, rows)))
        if _STR_OR_NONE.issuperset(map(type, texts)):
            return _masked_made_rows(rows, texts, copied=copied)
    shown: dict[str, str] = {}

    def text(value):
        if type(value) is not str:
            return mask_json(value)
        masked = shown.get(value)
        if masked is None:
            masked = shown[value] = mask_text(value)
        return masked

    out = []
    for row in rows:
        if not _made_here(row):
            out.append(mask_json(row))
            continue
        row = dict(row)
        for field in _ROW_TEXTS:
            row[field] = text(row[field])
        out.append(row)
    return out


def _made_here(row) -> bool:
    """Is the row of RankRow's shape, its console-made fields holding only what they can?"""
    if type(row) is not dict or row.keys() != _ROW_KEYS:
        return False
    status = row["status"]
    if not _PLAIN.issuperset(map(type, _numbers(row))) or type(status) is not str:
        return False
    if status not in _STATUSES:
        return False
    when, signature = row["last_step_at"], row["stack_signature"]
    if when is not None and not (type(when) is str and _ISO_TIME.fullmatch(when)):
        return False
    return type(signature) is str and _HASH.fullmatch(signature) is not None


_DICT = frozenset({dict})
_STR = frozenset({str})
_STR_OR_NONE = frozenset({str, type(None)})
_texts = itemgetter(*_ROW_TEXTS)


def _all_made_here(rows: list) -> bool:
    """`_made_here` of every row, a column at a time, each distinct time and hash matched
    once (at 32,000 ranks the rows' one call each was most of the diagnosis's mask)."""
    if not _DICT.issuperset(map(type, rows)):
        return False
    if not all(map(eq, map(dict.keys, rows), repeat(_ROW_KEYS))):
        return False
    if not _PLAIN.issuperset(map(type, chain.from_iterable(map(_numbers, rows)))):
        return False
    statuses = list(map(itemgetter("status"), rows))
    if not _STR.issuperset(map(type, statuses)) or not _STATUSES.issuperset(statuses):
        return False
    times = list(map(itemgetter("last_step_at"), rows))
    if not _STR_OR_NONE.issuperset(map(type, times)):
        return False
    if not all(_ISO_TIME.fullmatch(when) for when in set(times) - {None}):
        return False
    signatures = list(map(itemgetter("stack_signature"), rows))
    if not _STR.issuperset(map(type, signatures)):
        return False
    return all(_HASH.fullmatch(signature) for signature in set(signatures))


def _masked_made_rows(rows: list, texts: list, *, copied: bool) -> list:
    """Rows of RankRow's shape (`_all_made_here`) whose texts read from evidence (`texts`,
    their node, frame and state in a row) are strings or None: each distinct one masked
    once (a fleet's rows share a few nodes' names, frames and states)."""
    shown = {text: mask_text(text) for text in set(texts) - {None}}
    if all(masked == text for text, masked in shown.items()):
        # No secret in any (the usual case): the rows as they are.
        return list(map(dict, rows)) if copied else list(rows)
    shown[None] = None
    out = []
    for row in rows:
        row = dict(row)
        for field in _ROW_TEXTS:
            row[field] = shown[row[field]]
        out.append(row)
    return out


def masked_artifact_text(name: str, content: bytes) -> str:
    """A stored artifact as masked text; an environment one variable a line."""
    piece = kinds.artifact_piece(name)
    kind = piece[0] if piece else None
    text = as_text(content)
    if kind is kinds.FLIGHT_RECORDER and not text.lstrip().startswith(("{", "[")):
        return "(a flight-recorder pickle: download the raw dump to read it)"
    masked = mask_text(text)
    if kind is kinds.ENVIRON:
        masked = masked.replace("\0", "\n")
    return masked
