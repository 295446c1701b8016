"""Which node a scheduler's or a cluster manager's line is about.

Explicit forms first: `NodeName=X` (scontrol), `Node X status is now: NodeNotReady` and
`Condition Ready of node X is false` (Kubernetes), `node X reason set to` / `Node failure on X` /
`*** STEP 1.0 ON X CANCELLED AT` (Slurm), `Owner Ip address: X` and `Worker IP address: X`
(Ray), `kubelet, X` (an event's source). Then table rows, whose columns say it by position:
`kubectl get nodes` and `sinfo -N` put the node first, `sinfo` and `sinfo -R` last (NODELIST),
a `kubectl get events` row puts it after the pod's status. Slurm's compressed lists
(`c[020-022]`, `gpu[001-004,010]`) are expanded, bounded.
"""

from __future__ import annotations

import re

MAX_NODES = 64  # nodes one line may name
HEAD = 4096

_EXPLICIT = re.compile(
    r"\bNodeName=([\w.\[\],-]{1,255})"
    r"|\bNode ([\w.-]{1,255}) status is now"
    r"|\bof node ([\w.-]{1,255}) is"
    r"|\bnodes? ([\w.\[\],-]{1,255}) (?:reason set to|not responding|is not responding|is down)"
    r"|\b[Ff]ailure on ([\w.\[\],-]{1,255})"
    r"|\bON ([\w.\[\]-]{1,255}) (?:CANCELLED )?AT\b"
    r"|\b[Ii][Pp] [Aa]ddress: ([\w.:-]{1,255})"
    r"|\bnode id: \w{1,64} and (?:ip|address): ([\w.:-]{1,255})"
    r"|\bkubelet, ([\w.-]{1,255})"
)
_HOSTLIST = re.compile(r"([\w.-]{0,200})\[([\d,-]{1,200})\]([\w.-]{0,60})$")
_DURATION = re.compile(r"\d{1,6}[smhd](?:\d{1,6}[smh])*")
_VERSION = re.compile(r"v\d{1,4}(?:\.\d{1,6}){0,4}")
# Cells of a table row that state a node's (or a pod's) trouble, spelled as kubectl and
# sinfo print them, and the kind each is.
STATE_CELLS = {
    "NotReady": "node_state",
    "Unknown": "node_state",
    "down": "node_state",
    "down*": "node_state",
    "drain": "node_state",
    "drain*": "node_state",
    "drained": "node_state",
    "drained*": "node_state",
    "draining": "node_state",
    "fail": "node_state",
    "fail*": "node_state",
    "failing": "node_state",
    "Evicted": "evicted",
    "Preempted": "evicted",
    "CrashLoopBackOff": "exit",
    "Error": "exit",
    "OOMKilled": "oom",
}


def hostlike(cell: str) -> bool:
    """A cell that can be a host name: letters and digits, '-', '.', a bracketed list; not a
    number, a time, a duration (17h, 2m32s) or a version (v1.15.11)."""
    if not cell or len(cell) > 255 or not any(c.isdigit() for c in cell):
        return False
    if cell.isdigit() or ":" in cell or "/" in cell or "_" in cell or "=" in cell:
        return False
    if _DURATION.fullmatch(cell) or _VERSION.fullmatch(cell):
        return False
    head = cell.split("[", 1)[0]
    return (head[:1].isalnum() or cell[:1] == "[") and all(
        c.isalnum() or c in "-.[]," for c in cell
    )


def expand(name: str) -> list[str]:
    """`c[020-022]` -> c020, c021, c022 (at most MAX_NODES); anything else as it is."""
    match = _HOSTLIST.match(name)
    if not match:
        return [name.strip(".,:")]
    prefix, ranges, suffix = match.groups()
    names: list[str] = []
    for part in ranges.split(",")[:MAX_NODES]:
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            continue
        width = len(first)
        stop = min(int(last) if last else int(first), int(first) + MAX_NODES)
        for number in range(int(first), stop + 1):
            names.append(f"{prefix}{number:0{width}d}{suffix}")
            if len(names) >= MAX_NODES:
                return names
    return names or [name]


def row_state(message: str) -> tuple[str | None, list[str]]:
    """(kind, nodes) of a table row naming a state in a cell of its own, else (None, [])."""
    if message.count("  ") < 2:
        return None, []  # not columns aligned by runs of spaces
    cells = message.split()[:64]
    if len(cells) < 3:
        return None, []
    for index, cell in enumerate(cells):
        kind = STATE_CELLS.get(cell)
        if kind is None:
            continue
        if kind == "evicted" and index + 1 < len(cells) and hostlike(cells[index + 1]):
            return kind, expand(cells[index + 1])
        if index > 0 and hostlike(cells[0]):
            return kind, expand(cells[0])
        if hostlike(cells[-1]):
            return kind, expand(cells[-1])
        return kind, []
    return None, []


def named_nodes(message: str) -> list[str]:
    """The nodes a line names, explicitly or by its table's layout; failing both, the last
    cell that looks like a host (`sinfo -R`'s NODELIST after a free-text reason)."""
    match = _EXPLICIT.search(message[:HEAD])
    if match:
        name = next(g for g in match.groups() if g is not None)
        return expand(name)
    nodes = row_state(message)[1]
    if nodes:
        return nodes
    cells = message[:HEAD].split()
    if len(cells) >= 3 and hostlike(cells[-1]):
        return expand(cells[-1])
    return []
