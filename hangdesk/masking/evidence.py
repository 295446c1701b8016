"""Collected evidence as a person or an export may see it: every piece through text.py (by
variable name in environments, by shape everywhere else).

Flight-recorder pickles stay as they are: they hold collective records and stack frames (no
environment, no command line), and masking inside a pickle would need unpickling it; JSON
dumps are text and are masked like the rest.
"""

from __future__ import annotations

from dataclasses import replace

from analysis.diagnosis import Diagnosis
from analysis.evidence import NodeEvidence, SnapshotEvidence
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
    """A diagnosis as it may be stored and shown: its JSON with every secret masked."""
    return mask_json(diagnosis.to_json())


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
