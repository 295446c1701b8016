"""NodeEvidence <-> named raw artifacts, in the layout of an evidence bundle.

Names follow docs/bundle-format.md (`ps.txt`, `environ/<pid>`, `pyspy/<pid>.json`, ...),
so what is stored for a snapshot is what a bundle holds, file for file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime

from analysis.evidence import NodeEvidence

# A last line of defence; the remote side already caps each artifact.
ARTIFACT_CAP_BYTES = 8 * 1024 * 1024
TRUNCATION_MARKER = b"\n[... truncated by hangdesk at %d bytes ...]\n"


def artifacts_from_evidence(evidence: NodeEvidence) -> Iterator[tuple[str, bytes, bool]]:
    """(name, content, truncated) for every piece of raw evidence the node gave.

    `NodeEvidence.truncated` names pieces as the collector does: `ps`, `dmesg`, `nvidia_smi`,
    `shell_init`, `environ:<pid>`, `pyspy:<pid>`, `system:<name>`, `logs:<path>`,
    `flight_recorder:<path>`, `output` (the node's total cap). The list travels in node.json.
    """
    truncated = set(evidence.truncated)
    pieces: list[tuple[str, str | bytes, str]] = [
        (name, text, key)
        for name, text, key in (
            ("ps.txt", evidence.ps, "ps"),
            ("dmesg.txt", evidence.dmesg, "dmesg"),
            ("nvidia-smi.txt", evidence.nvidia_smi, "nvidia_smi"),
            ("shell-init.txt", evidence.shell_init, "shell_init"),
        )
        if text is not None
    ]
    pieces += [
        (f"environ/{pid}", raw, f"environ:{pid}") for pid, raw in sorted(evidence.environ.items())
    ]
    for pid, dump in sorted(evidence.pyspy.items()):
        suffix = "json" if dump.lstrip().startswith(("[", "{")) else "txt"
        pieces.append((f"pyspy/{pid}.{suffix}", dump, f"pyspy:{pid}"))
    pieces += [(f"pyspy/{pid}.error", e, "") for pid, e in sorted(evidence.pyspy_errors.items())]
    pieces += [(f"system/{n}", text, f"system:{n}") for n, text in sorted(evidence.system.items())]
    pieces += [(f"logs/{p}", text, f"logs:{p}") for p, text in sorted(evidence.logs.items())]
    pieces += [
        (f"flight_recorder/{p}", raw, f"flight_recorder:{p}")
        for p, raw in sorted(evidence.flight_recorder.items())
    ]
    for name, content, key in pieces:
        data = content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content
        if len(data) > ARTIFACT_CAP_BYTES:
            data = data[:ARTIFACT_CAP_BYTES] + TRUNCATION_MARKER % ARTIFACT_CAP_BYTES
            truncated.add(key)
        yield name, data, bool(key) and key in truncated
    meta = {
        "hostname": evidence.hostname,
        "status": evidence.status,
        "collected_at": evidence.collected_at.isoformat() if evidence.collected_at else None,
        "truncated": sorted(truncated),
    }
    yield "node.json", json.dumps(meta, sort_keys=True).encode(), False


def evidence_from_artifacts(
    node: str, artifacts: Iterable[tuple[str, bytes, bool]], *, status: str = "ok"
) -> NodeEvidence:
    """Rebuild a node's evidence from its artifacts; unknown names are ignored."""
    evidence = NodeEvidence(node=node, status=status)
    for name, data, _truncated in artifacts:
        head, _, rest = name.partition("/")
        text = data.decode("utf-8", "replace")
        if name == "ps.txt":
            evidence.ps = text
        elif name == "dmesg.txt":
            evidence.dmesg = text
        elif name == "nvidia-smi.txt":
            evidence.nvidia_smi = text
        elif name == "shell-init.txt":
            evidence.shell_init = text
        elif name == "node.json":
            meta = _json_object(data)
            evidence.hostname = str(meta.get("hostname") or "")
            evidence.collected_at = parse_when(meta.get("collected_at"))
            cut = meta.get("truncated")
            evidence.truncated = [str(k) for k in cut] if isinstance(cut, list) else []
        elif head == "environ" and rest.isdigit():
            evidence.environ[int(rest)] = data
        elif head == "pyspy":
            pid, _, kind = rest.partition(".")
            if pid.isdigit():
                target = evidence.pyspy_errors if kind == "error" else evidence.pyspy
                target[int(pid)] = text
        elif head == "system" and rest:
            evidence.system[rest] = text
        elif head == "logs" and rest:
            evidence.logs[rest] = text
        elif head == "flight_recorder" and rest:
            evidence.flight_recorder[rest] = data
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
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
