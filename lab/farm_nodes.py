"""What each virtual node of the farm answers: captured probe output, renumbered.

A capture (lab/farm_captures/<scenario>/, written by lab/farm_capture.py) holds the real
output of the console's two scripts on each node of a 2-node torch lab. A farm node is one of
those captured nodes moved to its place in a bigger job: its hostname, address and ranks
renumbered (rank = node index x ranks per node + local rank), WORLD_SIZE and the default
process group's member list in every flight-recorder dump set to the farm's world, the
master address pointed at the farm's first node. Everything else (stacks, environments, log
lines, dumps' entries, dmesg) is the captured bytes. The node processes keep their pids: each
lab node had its own pid namespace, as each real node has its own kernel.

Which captured node a farm node replays, per fault:
  rank-gone       rank-exit: the fault node replays lab-node-1 (its last rank SIGKILLed),
                  every other node lab-node-0 (all ranks waiting in the all_reduce)
  group-mismatch  collective-mismatch: the fault node's last rank is in an extra barrier
  node-down       rank-exit's lab-node-0 everywhere; the fault node does not listen
  node-slow       as rank-gone, and the fault node answers `slow_s` seconds late
  none            rank-exit's lab-node-0 everywhere: all present, all in one all_reduce
"""

from __future__ import annotations

import gzip
import json
import pickle
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

CAPTURES = Path(__file__).with_name("farm_captures")
FAULTS = {
    "rank-gone": "rank-exit",
    "group-mismatch": "collective-mismatch",
    "node-down": "rank-exit",
    "node-slow": "rank-exit",
    "none": "rank-exit",
}
# Faults whose fault node replays the captured node with the misbehaving rank.
FAULT_NODE_REPLAYS_SUSPECT = ("rank-gone", "group-mismatch", "node-slow")

_FRAME = re.compile(rb"HD1 ([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*) (\d{1,12})\n")


def split_frames(raw: bytes) -> list[tuple[str, bytes]]:
    """The frames of one captured output, in order, without the end frame."""
    pos = raw.index(b"\n", raw.index(b"HDPROBE1 ")) + 1
    frames = []
    while True:
        match = _FRAME.match(raw, pos)
        if match is None:
            raise ValueError(f"capture: no frame header at byte {pos}")
        key, size = match.group(1).decode(), int(match.group(2))
        pos = match.end()
        if key == "end":
            return frames
        frames.append((key, raw[pos : pos + size]))
        pos += size


def frame_bytes(key: str, body: bytes) -> bytes:
    return b"HD1 %s %d\n" % (key.encode(), len(body)) + body


def gzip_member(body: bytes) -> bytes:
    """What `gzip -1 -n -c` writes on a node (no name, no time): a gzip member at level 1."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    return packer.compress(body) + packer.flush()


def packed_frame_bytes(key: str, body: bytes, member: bytes) -> bytes:
    """A frame as probelib.sh's hd_emit sends it gzipped."""
    return b"HD1 %s %d gz %d\n" % (key.encode(), len(body), len(member)) + member


@dataclass(frozen=True)
class FarmNode:
    index: int
    name: str
    address: str
    captured: int  # which captured node it replays
    fault: bool = False


class Capture:
    """One scenario's captured nodes, and how to move them to a farm node's place."""

    def __init__(self, scenario: str, root: Path = CAPTURES) -> None:
        folder = root / scenario
        self.meta = json.loads((folder / "capture.json").read_text())
        self.ranks_per_node: int = self.meta["ranks_per_node"]
        self.names: list[str] = self.meta["nodes"]
        self.addresses: list[str] = self.meta["node_addresses"]
        self.probe = [split_frames(self._read(folder, n, "probe")) for n in self.names]
        self.watch = [split_frames(self._read(folder, n, "watch")) for n in self.names]

    @staticmethod
    def _read(folder: Path, node: str, kind: str) -> bytes:
        return gzip.decompress((folder / f"{node}.{kind}.gz").read_bytes())

    @cached_property
    def suspect_rank(self) -> int:
        ranks = self.meta["expected"].get("suspect_ranks") or [-1]
        return ranks[0]


class Renumber:
    """The substitutions that move captured node `captured` to farm node `node`."""

    def __init__(self, capture: Capture, node: FarmNode, *, world: int, master: FarmNode) -> None:
        k = capture.ranks_per_node
        self.shift = (node.index - node.captured) * k
        self.world = world
        self.node = node
        # Captured host names: this node's becomes the farm node's, the other the farm's
        # first node. Addresses appear as the master's (MASTER_ADDR, the first captured node):
        # the farm's first node; another captured node's address is this node's.
        self.master = master
        self.names = {
            name: node.name if i == node.captured else master.name
            for i, name in enumerate(capture.names)
        }
        self.addresses = {
            addr: master.address if i == 0 else node.address
            for i, addr in enumerate(capture.addresses)
        }
        self._text = [
            (re.compile(rb"(\[rank)(\d+)(\])"), self._rank),
            (re.compile(rb"(\bRank )(\d+)(\])"), self._rank),
            (re.compile(rb"(\brank)(\d+)(\.log)"), self._rank),
            (re.compile(rb"(trace_rank_)(\d+)()"), self._rank),
            (re.compile(rb"(\brank )(\d+)(\b)"), self._rank),
            (re.compile(rb"(--fault-rank )(\d+)()"), self._rank),
            (re.compile(rb"(world_size=)(\d+)()"), self._world),
        ]
        names = b"|".join(re.escape(n.encode()) for n in sorted(self.names, key=len, reverse=True))
        self._names = re.compile(rb"\b(" + names + rb")\b")
        addresses = b"|".join(re.escape(a.encode()) for a in self.addresses)
        self._addresses = re.compile(rb"(?<![\d.])(" + addresses + rb")(?![\d])")

    def _rank(self, m: re.Match) -> bytes:
        return m.group(1) + str(int(m.group(2)) + self.shift).encode() + m.group(3)

    def _world(self, m: re.Match) -> bytes:
        return m.group(1) + str(self.world).encode() + m.group(3)

    def text(self, data: bytes) -> bytes:
        for pattern, replace in self._text:
            data = pattern.sub(replace, data)
        data = self._names.sub(lambda m: self.names[m.group(1).decode()].encode(), data)
        return self._addresses.sub(lambda m: self.addresses[m.group(1).decode()].encode(), data)

    def environ(self, data: bytes) -> bytes:
        out = []
        for item in data.split(b"\0"):
            name, sep, value = item.partition(b"=")
            if name == b"RANK":
                value = str(int(value) + self.shift).encode()
            elif name in (b"NODE_RANK", b"GROUP_RANK"):
                value = str(self.node.index).encode()
            elif name == b"WORLD_SIZE":
                value = str(self.world).encode()
            elif name == b"MASTER_ADDR":
                value = self.master.address.encode()
            out.append(name + sep + value)
        return b"\0".join(out)


def world_dump(dump: bytes, world: int) -> bytes:
    """A captured flight-recorder dump as a rank of a `world`-rank job writes it: the default
    group's member list (torch writes every global rank there) is the whole world."""
    content = pickle.loads(dump)  # noqa: S301 - the lab's own capture, not evidence
    for config in (content.get("pg_config") or {}).values():
        if isinstance(config, dict) and config.get("name", "") in ("", "0"):
            config["ranks"] = str(list(range(world)))
    return pickle.dumps(content, protocol=2)


class NodeAnswers:
    """The bytes every farm node answers, built on demand (a node's answer is a few hundred
    KB; 4,000 of them are not kept): frames that do not depend on the node are built once."""

    def __init__(
        self, capture: Capture, nodes: list[FarmNode], ranks_per_node: int, *, dump_world: int = 0
    ) -> None:
        if ranks_per_node != capture.ranks_per_node:
            raise ValueError(
                f"the {capture.meta['scenario']} capture has {capture.ranks_per_node} ranks per "
                f"node: use --ranks-per-node {capture.ranks_per_node}, or capture again with "
                f"python -m lab farm-capture --ranks-per-node {ranks_per_node}"
            )
        self.capture = capture
        self.nodes = nodes
        self.world = len(nodes) * ranks_per_node
        self.dump_world = dump_world or self.world
        self._dumps: dict[bytes, bytes] = {}
        # Frames that are the same bytes object on every node (captured as they are, or the
        # dumps), by id (they live as long as this), and their gzip members once made.
        self._shared = {id(body) for frames in capture.probe for _, body in frames}
        self._members: dict[int, bytes] = {}

    def _renumber(self, node: FarmNode) -> Renumber:
        return Renumber(self.capture, node, world=self.world, master=self.nodes[0])

    def probe(self, node: FarmNode, nonce: str, *, zip_min: int | None = None) -> bytes:
        """The node's answer; with `zip_min`, its frames of that many bytes or more gzipped,
        as the probe sends them from a node with gzip when the console asks (HD_ZIP)."""
        r = self._renumber(node)
        parts = [b"HDPROBE1 %s\n" % nonce.encode()]
        for key, body in self.capture.probe[node.captured]:
            frame = self._probe_frame(r, node, key, body)
            if zip_min is None or len(frame) < zip_min:
                parts.append(frame_bytes(key, frame))
            else:
                parts.append(packed_frame_bytes(key, frame, self._member(frame)))
        parts.append(b"HD1 end 0\n")
        return b"".join(parts)

    def _member(self, frame: bytes) -> bytes:
        """Frames the same on every node (the dumps, stacks, dmesg) compressed once."""
        member = self._members.get(id(frame))
        if member is None:
            member = gzip_member(frame)
            if id(frame) in self._shared:
                self._members[id(frame)] = member
        return member

    def _probe_frame(self, r: Renumber, node: FarmNode, key: str, body: bytes) -> bytes:
        if key == "hostname":
            return node.name.encode()
        if key.startswith("env."):
            return r.environ(body)
        if key.startswith("fr.") and not key.endswith(".path"):
            if body not in self._dumps:
                self._dumps[body] = world_dump(body, self.dump_world)
                self._shared.add(id(self._dumps[body]))
            return self._dumps[body]
        if key == "sys.date":
            return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ\n").encode()
        if key.startswith(("log.", "fr.", "ps")):
            return r.text(body)
        return body  # stacks, dmesg, df, free: the node's own bytes, whoever it is

    def watch(self, node: FarmNode, nonce: str, *, with_logs: bool) -> bytes:
        r = self._renumber(node)
        parts = [b"HDPROBE1 %s\n" % nonce.encode()]
        for key, body in self.capture.watch[node.captured]:
            if key.startswith("log.") and not with_logs:
                continue
            parts.append(frame_bytes(key, r.text(body)))
        parts.append(b"HD1 end 0\n")
        return b"".join(parts)


def fault_node_index(nodes: int) -> int:
    """The node the fault is planted on: two thirds in (neither the first nor the last)."""
    return min(nodes - 1, (2 * nodes) // 3)


def expected(fault: str, capture: Capture, nodes: list[FarmNode], slow_s: float) -> dict:
    """What the console should conclude about the farm's job."""
    k = capture.ranks_per_node
    world = len(nodes) * k
    f = nodes[fault_node_index(len(nodes))]
    node_ranks = list(range(f.index * k, (f.index + 1) * k))
    out: dict = {"fault": fault, "world_size": world, "fault_node": f.name}
    if fault in FAULT_NODE_REPLAYS_SUSPECT:
        local = capture.suspect_rank - f.captured * k
        rank = f.index * k + local
        captured = capture.meta["expected"]
        out.update(
            classification=captured["classification"],
            suspect_ranks=[rank],
            suspect_node=f.name,
            missing_ranks=[rank] if captured.get("missing_ranks") else [],
            last_global_step=captured.get("last_global_step"),
        )
    elif fault == "node-down":
        out.update(
            classification="A", suspect_ranks=node_ranks, suspect_node=f.name,
            unobserved_ranks=node_ranks,
        )  # fmt: skip
    else:
        out.update(classification="C", suspect_ranks=[], suspect_node="")
    if fault == "node-slow":
        out.update(slow_node=f.name, slow_s=slow_s, provisional_unobserved=node_ranks)
    return out


def farm_nodes(fault: str, addresses: list[str]) -> list[FarmNode]:
    f = fault_node_index(len(addresses))
    replays_suspect = fault in FAULT_NODE_REPLAYS_SUSPECT
    return [
        FarmNode(
            index=i,
            name=f"node-{i:04d}",
            address=address,
            captured=1 if (replays_suspect and i == f) else 0,
            fault=i == f and fault != "none",
        )
        for i, address in enumerate(addresses)
    ]
