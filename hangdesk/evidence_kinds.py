"""The kinds of raw evidence, and every name each one goes by: one table.

A row names a kind four ways, and every layer takes its names from here:
- the probe's frame key (probe.sh writes it, `frames.py` reads it): `ps`, `env.<pid>`,
  `log.<n>` (with `log.<n>.path` carrying the log's path), ...
- the `NodeEvidence` field it fills, which is also how `NodeEvidence.truncated` names a piece
  cut at a cap: `ps`, `environ:<pid>`, `logs:<path>`, ...
- the stored artifact's name (`Artifact.name`, `artifacts.py`): `ps.txt`, `environ/<pid>`, ...
- its path in an evidence bundle under the node's folder (`bundles.py`,
  docs/bundle-format.md): the artifact's name, a log's or dump's absolute path made relative.

Pure: no Django, no paramiko.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from analysis.evidence import NodeEvidence

Key = int | str


@dataclass(frozen=True)
class EvidenceKind:
    # The NodeEvidence attribute; a str/bytes value, or a dict of key -> value.
    field: str
    # The frame key of a single piece, or the head of `<head>.<pid>` / `<head>.<n>` keys.
    frame: str
    # The artifact name of a single piece, or the folder of one artifact per key.
    stored: str
    # What tells the pieces of one kind apart: nothing, a pid, a remote path, a name.
    key: Literal["", "pid", "path", "name"] = ""
    # Kept as bytes; text otherwise.
    binary: bool = False
    # After "<pid>" in the artifact name.
    suffix: str = ""


PS = EvidenceKind("ps", "ps", "ps.txt")
DMESG = EvidenceKind("dmesg", "dmesg", "dmesg.txt")
NVIDIA_SMI = EvidenceKind("nvidia_smi", "nvsmi", "nvidia-smi.txt")
SHELL_INIT = EvidenceKind("shell_init", "shellinit", "shell-init.txt")
# What `ncclras` answered (JSON or text, as the client printed it; the analysis tells which).
NCCLRAS = EvidenceKind("ncclras", "ncclras", "ncclras.txt")
ENVIRON = EvidenceKind("environ", "env", "environ", key="pid", binary=True)
# A dump is stored as <pid>.json or <pid>.txt, by its content (JSON or the text dump).
PYSPY = EvidenceKind("pyspy", "pyspy", "pyspy", key="pid")
PYSPY_ERRORS = EvidenceKind("pyspy_errors", "pyspyerr", "pyspy", key="pid", suffix=".error")
# The sampling window (`py-spy record --format raw`): where each process spent those seconds.
PYSPY_SAMPLES = EvidenceKind("pyspy_samples", "pyspyrec", "pyspy", key="pid", suffix=".samples")
# Named facts; their frames are listed one by one in SYSTEM_FRAMES.
SYSTEM = EvidenceKind("system", "sys", "system", key="name")
LOGS = EvidenceKind("logs", "log", "logs", key="path")
FLIGHT_RECORDER = EvidenceKind("flight_recorder", "fr", "flight_recorder", key="path", binary=True)

# In the order artifacts are written (and bundles list them).
KINDS = (
    PS,
    DMESG,
    NVIDIA_SMI,
    SHELL_INIT,
    NCCLRAS,
    ENVIRON,
    PYSPY,
    PYSPY_ERRORS,
    PYSPY_SAMPLES,
    SYSTEM,
    LOGS,
    FLIGHT_RECORDER,
)

# Frame key -> the name of the system fact it carries.
SYSTEM_FRAMES = {
    "sys.df_shm": "df -h /dev/shm",
    "sys.df_root": "df -h /",
    "sys.loadavg": "loadavg",
    "sys.free": "free -m",
    "sys.date": "date",
    "dmesg.source": "dmesg source",
    "nvsmi.query": "nvidia-smi gpus",
    "nvsmi.apps": "nvidia-smi processes",
    "nvsmi.absent": "nvidia-smi",
    "nvsmi.samples": "nvidia-smi samples",
    "errors": "probe errors",
}

# A system fact's file in a bundle (system/<file>): fact names hold spaces and slashes
# ("df -h /dev/shm"), which no file system takes as one name. Facts not listed get a slug.
SYSTEM_FILES = {
    "df -h /dev/shm": "df-shm.txt",
    "df -h /": "df-root.txt",
    "loadavg": "loadavg.txt",
    "free -m": "free.txt",
    "date": "date.txt",
    "dmesg source": "dmesg-source.txt",
    "nvidia-smi gpus": "nvidia-smi-gpus.txt",
    "nvidia-smi processes": "nvidia-smi-processes.txt",
    "nvidia-smi": "nvidia-smi.txt",
    "nvidia-smi samples": "nvidia-smi-samples.csv",
    "dcgm": "dcgm.json",
    "probe errors": "probe-errors.txt",
    "probe stderr": "probe-stderr.txt",
    "output before probe": "output-before-probe.txt",
    "collection": "collection.txt",
}
_SYSTEM_NAMES = {file: name for name, file in SYSTEM_FILES.items()}

_SINGLE_BY_FRAME = {k.frame: k for k in KINDS if not k.key}
_KEYED_BY_FRAME = {k.frame: k for k in KINDS if k.key in ("pid", "path")}
_SINGLE_BY_NAME = {k.stored: k for k in KINDS if not k.key}


def as_text(data: bytes) -> str:
    """Collected bytes as text, every byte kept visible (\\xff), nothing a database refuses."""
    return data.decode("utf-8", "backslashreplace")


def is_pid(text: str) -> bool:
    """ASCII digits, at most nine (Linux pids stop at 2**22; nine digits fit every integer
    column): "²".isdigit() is true and int("²") raises, and int() of 5,000 digits raises too."""
    return 0 < len(text) <= 9 and text.isascii() and text.isdigit()


def piece_name(kind: EvidenceKind, key: Key = "") -> str:
    """How `NodeEvidence.truncated` names one piece: `ps`, `environ:<pid>`, `logs:<path>`."""
    return f"{kind.field}:{key}" if kind.key else kind.field


# --- probe frames ------------------------------------------------------------------------


def frame_piece(frame_key: str, frames: Mapping[str, bytes]) -> tuple[EvidenceKind, Key] | None:
    """The kind and key of one probe frame; None for frames that are not evidence pieces
    (`hostname`, `trunc.*`, `*.path`) and for keys this table does not know."""
    if frame_key in SYSTEM_FRAMES:
        return SYSTEM, SYSTEM_FRAMES[frame_key]
    if frame_key in _SINGLE_BY_FRAME:
        return _SINGLE_BY_FRAME[frame_key], ""
    head, _, rest = frame_key.partition(".")
    kind = _KEYED_BY_FRAME.get(head)
    if kind is None or not is_pid(rest):
        return None
    if kind.key == "pid":
        return kind, int(rest)
    path = frames.get(f"{frame_key}.path")
    return (kind, as_text(path)) if path is not None else None


# --- NodeEvidence ------------------------------------------------------------------------


def pieces(evidence: NodeEvidence) -> Iterator[tuple[EvidenceKind, Key, str | bytes]]:
    """Every piece of raw evidence the node gave, kind by kind, keys sorted."""
    for kind in KINDS:
        value = getattr(evidence, kind.field)
        if not kind.key:
            if value is not None:
                yield kind, "", value
            continue
        for key, content in sorted(value.items()):
            yield kind, key, content


def put(
    evidence: NodeEvidence, kind: EvidenceKind, key: Key, data: bytes, *, errors: str = "replace"
) -> None:
    """Store one piece on the evidence, as bytes or as text (decoded with `errors`)."""
    value = data if kind.binary else data.decode("utf-8", errors)
    if kind.key:
        getattr(evidence, kind.field)[key] = value
    else:
        setattr(evidence, kind.field, value)


# --- stored artifacts ----------------------------------------------------------------------


def artifact_name(kind: EvidenceKind, key: Key, content: str | bytes) -> str:
    if not kind.key:
        return kind.stored
    suffix = kind.suffix
    if kind is PYSPY:
        text = content if isinstance(content, str) else as_text(content)
        suffix = ".json" if text.lstrip().startswith(("[", "{")) else ".txt"
    return f"{kind.stored}/{key}{suffix}"


def artifact_piece(name: str) -> tuple[EvidenceKind, Key] | None:
    """The kind and key of a stored artifact's name; None for names this table does not know."""
    if name in _SINGLE_BY_NAME:
        return _SINGLE_BY_NAME[name], ""
    head, _, rest = name.partition("/")
    if head == PYSPY.stored:
        pid, _, ending = rest.partition(".")
        if not is_pid(pid):
            return None
        by_suffix = {k.suffix: k for k in (PYSPY_ERRORS, PYSPY_SAMPLES)}
        return by_suffix.get(f".{ending}", PYSPY), int(pid)
    if head == ENVIRON.stored:
        return (ENVIRON, int(rest)) if is_pid(rest) else None
    for kind in (SYSTEM, LOGS, FLIGHT_RECORDER):
        if head == kind.stored and rest:
            return kind, rest
    return None


# --- bundles -----------------------------------------------------------------------------

_PATH_FOLDERS = tuple(k.stored for k in KINDS if k.key == "path")


def system_file(name: str) -> str:
    """A system fact's file name in a bundle: from SYSTEM_FILES, else a slug of its name."""
    if name in SYSTEM_FILES:
        return SYSTEM_FILES[name]
    slug = "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "-" for c in name)
    return "-".join(part for part in slug.split("-") if part).strip(".")[:100] or "fact"


def bundle_path(name: str) -> str:
    """A stored artifact's path inside its node's folder of a bundle: logs and dumps are named
    by their remote path, kept minus the leading slash; system facts by SYSTEM_FILES."""
    head, _, rest = name.partition("/")
    if head in _PATH_FOLDERS:
        return f"{head}/{rest.lstrip('/')}"
    if head == SYSTEM.stored and rest:
        return f"{head}/{system_file(rest)}"
    return name


def artifact_name_of_bundle_path(path: str) -> str:
    """The inverse of bundle_path(): a deeper path under logs/ is an absolute remote path; a
    system fact's file is its fact's name (older bundles' raw names are read as they are)."""
    head, _, rest = path.partition("/")
    if head in _PATH_FOLDERS and rest:
        return f"{head}//{rest}" if "/" in rest else f"{head}/{rest}"
    if head == SYSTEM.stored and rest in _SYSTEM_NAMES:
        return f"{head}/{_SYSTEM_NAMES[rest]}"
    return path
