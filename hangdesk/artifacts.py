"""NodeEvidence <-> named raw artifacts, in the layout of an evidence bundle.

Names follow docs/bundle-format.md (`ps.txt`, `environ/<pid>`, `pyspy/<pid>.json`, ...),
so what is stored for a snapshot is what a bundle holds, file for file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime

from analysis.evidence import GATHERED, EvidenceStatus, NodeEvidence

from . import evidence_kinds as kinds

# A last line of defence; the remote side already caps each artifact.
ARTIFACT_CAP_BYTES = 8 * 1024 * 1024
TRUNCATION_MARKER = b"\n[... truncated by hangdesk at %d bytes ...]\n"
# The node's own facts (hostname, status, when, what was cut), beside its evidence pieces.
NODE_META = "node.json"


def artifacts_from_evidence(evidence: NodeEvidence) -> Iterator[tuple[str, bytes, bool]]:
    """(name, content, truncated) for every piece of raw evidence the node gave.

    Names come from the evidence-kind table (evidence_kinds.py); so do the names in
    `NodeEvidence.truncated` (`ps`, `environ:<pid>`, `logs:<path>`, ...), plus `output` for
    the node's total cap. The truncated list travels in node.json.
    """
    truncated = set(evidence.truncated)
    for kind, key, content in kinds.pieces(evidence):
        piece = kinds.piece_name(kind, key)
        data = content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content
        if len(data) > ARTIFACT_CAP_BYTES:
            data = data[:ARTIFACT_CAP_BYTES] + TRUNCATION_MARKER % ARTIFACT_CAP_BYTES
            truncated.add(piece)
        yield kinds.artifact_name(kind, key, content), data, piece in truncated
    meta = {
        "hostname": evidence.hostname,
        **evidence.status.to_json(),
        "collected_at": evidence.collected_at.isoformat() if evidence.collected_at else None,
        "truncated": sorted(truncated),
    }
    yield NODE_META, json.dumps(meta, sort_keys=True).encode(), False


def evidence_from_artifacts(
    node: str, artifacts: Iterable[tuple[str, bytes, bool]], *, status: EvidenceStatus = GATHERED
) -> NodeEvidence:
    """Rebuild a node's evidence from its artifacts; unknown names are ignored."""
    evidence = NodeEvidence(node=node, status=status)
    for name, data, _truncated in artifacts:
        if name == NODE_META:
            meta = _json_object(data)
            hostname = meta.get("hostname")
            evidence.hostname = hostname[:255] if isinstance(hostname, str) else ""
            evidence.collected_at = parse_when(meta.get("collected_at"))
            cut = meta.get("truncated")
            cut = cut[:10_000] if isinstance(cut, list) else []
            evidence.truncated = [k[:4096] for k in cut if isinstance(k, str)]
            continue
        found = kinds.artifact_piece(name)
        if found is not None:
            kinds.put(evidence, *found, data)
    return evidence


def parse_when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _json_object(data: bytes) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return {}
    return value if isinstance(value, dict) else {}
