"""Line-level facts from what NCCL and PyTorch's NCCL process group print.

Each public function takes ONE log line and returns facts about it, keeping no state, so the
log reader (`logs.parse_log`) can call them on every line of thousands of logs:

- `collective_facts`: where a rank stands in a process group's sequence of collectives
  (the watchdog in every PyTorch wording, the desync report, DETAIL-mode fingerprints);
- `peer_fact`: a rank reporting trouble with a named peer (NCCL IB/socket, gloo, c10d store,
  monitored barrier); the peer is the likely culprit;
- `nccl_config_fact`: what NCCL reports choosing on a host (version, net plugin, transport,
  interfaces, bootstrap interface, CUDA driver), normalised so equal set-ups compare equal;
- `slow_facts`: a framework naming a slow rank (Megatron-LM's straggler detector,
  nvidia-resiliency-ext).

Evidence is untrusted, so everything here is bounded. Every function first checks cheap
substrings and returns at once when none is present. Every regular expression below is linear
by construction: each repetition is bounded (`{m,n}`), no quantified group contains another
quantifier over the same characters, and each is applied only to a window of at most a few
kilobytes cut around a keyword found with `str.find`, never to the whole line. Loops over
occurrences are capped, stored strings are cut (`line[:1000]`, shapes to 200 characters) and
the number of facts one line can yield is capped.

Ranks: for the watchdog family `rank` is the global rank of the `[rankN]:` prefix PyTorch puts
on each line when present, else the rank printed in the message (`[Rank N]`, `[PG .. Rank N]`),
which is the rank within that process group. DETAIL and desync lines name other ranks; those
are the ranks of the group that printed the report.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

LINE_CAP = 1000  # characters of the line kept in a fact
SHAPES_CAP = 200
MAX_FACTS = 1024  # facts one line may yield (a desync report can name every rank)
_HEAD = 400  # characters before a keyword searched for the rank / process-group prefix
_RANK_LIST_CAP = 20000  # characters of a "[0, 1, 2, ...]" rank list we are willing to read
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True)
class CollectiveFact:
    """One rank's position in one process group's sequence of collectives, as one line says."""

    source: str  # "watchdog" | "detail" | "desync"
    rank: int | None  # whose fingerprint/position this is, when the line says
    seq: int | None  # collective sequence number (SeqNum / work / "#315" / SequenceNumber)
    op: str | None  # as PyTorch prints it, upper-case: "ALLREDUCE", "_ALLGATHER_BASE", ...
    pg: str | None  # process group as printed ("0", "1"), its description when no number
    numel_in: int | None
    numel_out: int | None
    dtype: str | None  # "Float", "BFloat16", ... when printed
    shapes: str | None  # input tensor shapes as printed, e.g. "[20, 10]"
    last_enqueued: int | None
    last_completed: int | None
    timeout_ms: int | None
    line: str


@dataclass(frozen=True)
class PeerFact:
    """A line in which a rank reports trouble with a named peer: the peer is the likely culprit."""

    peer_rank: int | None
    peer_addr: str | None  # IP address only, port (and IPv6 scope) stripped
    peer_host: str | None
    reason: str  # short plain words: "connection closed by peer", "timed out", ...
    line: str


@dataclass(frozen=True)
class NcclConfigFact:
    """What NCCL reports choosing on one host: compared across nodes like the environment."""

    host: str | None  # from the NCCL line prefix "host:pid:tid [dev]" when present
    key: str  # "version" | "net_plugin" | "net" | "interfaces" | "cuda_driver" | "bootstrap"
    value: str  # normalised so equal configurations compare equal across hosts
    addresses: tuple[str, ...]  # IP addresses the line ties to that host
    line: str


@dataclass(frozen=True)
class SlowFact:
    """A framework names a rank as slow (straggler detection)."""

    rank: int
    source: str  # "megatron" | "nvrx"
    value: float | None  # the figure printed for that rank (time, throughput), when any
    line: str


# --- small bounded helpers -------------------------------------------------------------------


def _int_at(text: str, start: int) -> int | None:
    """The decimal number starting at `start` (at most 20 digits, "-1" allowed), or None."""
    sign = 1
    if text.startswith("-", start):
        sign, start = -1, start + 1
    end = start
    stop = min(len(text), start + 20)
    while end < stop and text[end] in _DIGITS:
        end += 1
    return sign * int(text[start:end]) if end > start else None


def _int_after(text: str, key: str) -> int | None:
    i = text.find(key)
    return None if i < 0 else _int_at(text, i + len(key))


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _word_after(text: str, key: str) -> str | None:
    i = text.find(key)
    if i < 0:
        return None
    m = _WORD.match(text, i + len(key))
    return m.group(0) if m else None


def _rank_list(text: str) -> list[int]:
    """Ranks of a printed list such as "7" or "1, 3, 5" (anything else: none)."""
    ranks: list[int] = []
    for part in text.split(",", MAX_FACTS)[:MAX_FACTS]:
        part = part.strip()
        if not part or not set(part) <= _DIGITS or len(part) > 9:
            return []
        ranks.append(int(part))
    return ranks


def _bracketed_ranks_before(line: str, close: int) -> list[int]:
    """Ranks of the "[1, 3]" list whose closing bracket is at `close`."""
    opening = line.rfind("[", max(0, close - _RANK_LIST_CAP), close)
    return [] if opening < 0 else _rank_list(line[opening + 1 : close])


# --- who printed it: "[rankN]:" prefix, "[PG .. Rank N]", "[Rank N]" ------------------------

_GLOBAL_RANK = re.compile(r"\[rank(\d{1,7})\]:")
# [PG 1 Rank 0] / [PG 0 (default_pg) Rank 12] / [PG ID 0 PG GUID 0(default_pg) Rank 1] /
# [PG ID 3 PG GUID d03ba1...45 Rank 1]
_PG_PREFIX = re.compile(
    r"\[PG (?:ID )?(\d{1,9})(?: PG GUID [\w:.-]{1,128})? ?(?:\(([^()\[\]\n]{0,128})\))?"
    r" Rank (\d{1,9})\]"
)
_RANK_BRACKET = re.compile(r"\[Rank (\d{1,9})\]")


def _who(line: str, pos: int) -> tuple[int | None, str | None]:
    """(rank, process group) printed before position `pos` of the line."""
    head = line[max(0, pos - _HEAD) : pos]
    pg: str | None = None
    msg_rank: int | None = None
    for m in _PG_PREFIX.finditer(head):
        pg = m.group(1) or m.group(2)
        msg_rank = int(m.group(3))
    if msg_rank is None:
        for m in _RANK_BRACKET.finditer(head[-200:]):
            msg_rank = int(m.group(1))
    prefix = _GLOBAL_RANK.search(line, 0, min(pos, _HEAD))
    return (int(prefix.group(1)) if prefix else msg_rank), pg


# --- collective_facts -------------------------------------------------------------------------


def _fact(source: str, line: str, **fields) -> CollectiveFact:
    base = dict.fromkeys(
        (
            "rank",
            "seq",
            "op",
            "pg",
            "numel_in",
            "numel_out",
            "dtype",
            "shapes",
            "last_enqueued",
            "last_completed",
            "timeout_ms",
        )
    )
    base.update(fields)
    return CollectiveFact(source=source, line=line[:LINE_CAP], **base)


def _work_nccl_fact(line: str) -> CollectiveFact | None:
    """`WorkNCCL(SeqNum=.., OpType=.., NumelIn=.., NumelOut=.., Timeout(ms)=..)` and its
    older forms (no NumelIn/Out; `OpType=.., TensorShape=[..]` without SeqNum)."""
    i = line.find("WorkNCCL(")
    if i < 0:
        return None
    body = line[i + 9 : i + 9 + 400]
    t = body.find("Timeout(ms)=")
    close = body.find(")", t + 12) if t >= 0 else body.find(")")
    if close >= 0:
        body = body[:close]
    seq = _int_after(body, "SeqNum=")
    op = _word_after(body, "OpType=")
    if seq is None and op is None:
        return None
    shapes = None
    s = body.find("TensorShape=[")
    if s >= 0:
        e = body.find("]", s)
        shapes = body[s + 12 : e + 1][:SHAPES_CAP] if e >= 0 else None
    rank, pg = _who(line, i)
    return _fact(
        "watchdog",
        line,
        rank=rank,
        pg=pg,
        seq=seq,
        op=op,
        numel_in=_int_after(body, "NumelIn="),
        numel_out=_int_after(body, "NumelOut="),
        timeout_ms=_int_after(body, "Timeout(ms)="),
        shapes=shapes,
    )


# Where the watchdog states a work sequence number and the group's queue state.
_SEQ_KEYS = (
    "detected by watchdog at work: ",
    "watchdog at work sequence id: ",
    "Timeout at NCCL work: ",
)
_ENQ_KEYS = ("enqueued NCCL work: ", "enqueued work: ")
_DONE_KEYS = ("completed NCCL work: ", "completed work: ")


def _first_int(text: str, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = _int_after(text, key)
        if value is not None:
            return value
    return None


def _queue_fact(line: str) -> CollectiveFact | None:
    """`[PG .. Rank N] Exception ... detected by watchdog at work: A, last enqueued NCCL work: B,
    last completed NCCL work: C`, its `failure detected ... PG status` and `Timeout at NCCL work`
    forms, and the dump-signal lines that state only the queue."""
    found = [i for i in (line.find(k) for k in _SEQ_KEYS + _ENQ_KEYS) if i >= 0]
    if not found:
        return None
    anchor = min(found)
    if "NCCL" not in line and "watchdog" not in line and "[PG " not in line:
        return None
    window = line[anchor : anchor + 400]
    seq = _first_int(window, _SEQ_KEYS)
    enq = _first_int(window, _ENQ_KEYS)
    done = _first_int(window, _DONE_KEYS)
    if seq is None and enq is None and done is None:
        return None
    rank, pg = _who(line, anchor)
    return _fact(
        "watchdog", line, rank=rank, pg=pg, seq=seq, last_enqueued=enq, last_completed=done
    )


_DESYNC_TIMEOUT = re.compile(r"\[(\d{1,9})\] Timeout at collective: (\w{1,64}), #(\d{1,20})")
# Ranks before a collective's number n: (phrase, then seq, last_enqueued, last_completed as
# offsets from n). "finished #n": stuck at n + 1; "joined but didn't finish #n": enqueued n.
_DESYNC_NUMBERED = (
    ("] finished collective #", 1, 0, 0),
    ("] joined but didn't finish collective #", 0, 0, -1),
)


def _desync_facts(line: str) -> list[CollectiveFact]:
    """TORCH_NCCL_DESYNC_DEBUG report lines. `seq` is the collective the rank is stuck at or
    short of; `last_enqueued` / `last_completed` follow from the wording ("joined" = enqueued)."""
    facts: list[CollectiveFact] = []
    i = line.find("Timeout at collective: ")
    if i >= 0:
        m = _DESYNC_TIMEOUT.search(line, max(0, i - 12), i + 120)
        if m:
            seq = int(m.group(3))
            facts.append(
                _fact(
                    "desync", line, rank=int(m.group(1)), op=m.group(2), seq=seq, last_enqueued=seq
                )
            )
    for phrase, seq, enqueued, completed in _DESYNC_NUMBERED:
        i = line.find(phrase)
        number = _int_at(line, i + len(phrase)) if i >= 0 else None
        if number is None:
            continue
        for rank in _bracketed_ranks_before(line, i):
            facts.append(
                _fact(
                    "desync",
                    line,
                    rank=rank,
                    seq=number + seq,
                    last_enqueued=number + enqueued,
                    last_completed=number + completed,
                )
            )
    i = line.find("] are the lagging ranks that caused this timeout")
    if i >= 0:
        for rank in _bracketed_ranks_before(line, i):
            facts.append(_fact("desync", line, rank=rank, last_enqueued=0, last_completed=0))
    return facts[:MAX_FACTS]


_RANK_TAIL = re.compile(r"Rank (\d{1,9})$")
_RUNNING = " is running "


def _fingerprint_fields(body: str) -> dict:
    """Fields of `CollectiveFingerPrint(SequenceNumber=1, OpType=.., TensorShape=[..],
    TensorDtypes=.., TensorDeviceTypes=..)` (also `SequenceNumber=1OpType=..`, no separator,
    and the older form without SequenceNumber), or of a bare op name (`... collective: REDUCE.`)."""
    if not body.startswith("CollectiveFingerPrint("):
        m = _WORD.match(body)
        return {"op": m.group(0)} if m else {}
    fields = {"seq": _int_after(body, "SequenceNumber="), "op": _word_after(body, "OpType=")}
    s = body.find("TensorShape=[")
    if s >= 0:
        e = body.find("]", s)
        if e >= 0:
            fields["shapes"] = body[s + 12 : e + 1][:SHAPES_CAP]
    d = body.find("TensorDtypes=")
    if d >= 0:
        ends = [x for x in (body.find(", TensorDeviceTypes", d), body.find(")", d)) if x >= 0]
        dtype = body[d + 13 : min(ends) if ends else d + 53].strip()
        fields["dtype"] = dtype[:40] or None
    return fields


def _detail_facts(line: str) -> list[CollectiveFact]:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: `Detected mismatch between collectives on ranks. Rank 1
    is running collective: CollectiveFingerPrint(..), but Rank 2 is running collective: ..`,
    one fact per rank named (at most four per line)."""
    if "CollectiveFingerPrint(" not in line and "mismatch between collectives" not in line:
        return []
    facts: list[CollectiveFact] = []
    pos = 0
    for _ in range(4):
        i = line.find(_RUNNING, pos)
        if i < 0:
            break
        start = i + len(_RUNNING)
        if line.startswith("collective: ", start):
            start += len("collective: ")
        elif line.startswith("inconsistent collective: ", start):
            start += len("inconsistent collective: ")
        else:
            pos = start
            continue
        m = _RANK_TAIL.search(line, max(0, i - 20), i)
        following = line.find(_RUNNING, start, start + 3000)
        body = line[start : following if following >= 0 else start + 3000]
        fields = _fingerprint_fields(body)
        if m and fields:
            facts.append(_fact("detail", line, rank=int(m.group(1)), **fields))
        pos = start
    return facts


def collective_facts(line: str) -> list[CollectiveFact]:
    """Every statement of a rank's position in a collective sequence this line makes."""
    facts: list[CollectiveFact] = []
    if "CollectiveFingerPrint(" in line or "mismatch between collectives" in line:
        facts.extend(_detail_facts(line))
    if (
        "Timeout at collective: " in line
        or "] finished collective #" in line
        or "] joined but didn't finish collective #" in line
        or "] are the lagging ranks" in line
    ):
        facts.extend(_desync_facts(line))
    if "WorkNCCL(" in line:
        fact = _work_nccl_fact(line)
        if fact:
            facts.append(fact)
    if "NCCL work: " in line or "watchdog at work" in line or "enqueued work: " in line:
        fact = _queue_fact(line)
        if fact:
            facts.append(fact)
    return facts[:MAX_FACTS]


# --- peer_fact --------------------------------------------------------------------------------

_HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")


def _endpoint(text: str) -> tuple[str | None, str | None]:
    """(IP address, host name) of a peer printed without its port."""
    text = text.strip().strip("[]")
    if not text or len(text) > 260:
        return None, None
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return (None, text) if _HOSTNAME.fullmatch(text) else (None, None)
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip), None


def _nccl_peer(line: str, start: int) -> tuple[str | None, str | None]:
    """NCCL prints a peer as `host_or_ip<port>`; anything else is not an NCCL peer."""
    end = line.find("<", start, start + 300)
    token = line[start:end] if end > start else ""
    return _endpoint(token) if token and " " not in token else (None, None)


def _bracket_peer(line: str, start: int) -> tuple[str | None, str | None]:
    """gloo and c10d print a peer as `[ip_or_host]:port`."""
    if not line.startswith("[", start):
        return None, None
    end = line.find("]", start, start + 300)
    return _endpoint(line[start + 1 : end]) if end >= 0 else (None, None)


_REASONS = (
    ("reset by peer", "connection reset by peer"),
    ("broken pipe", "broken pipe"),
    ("refused", "connection refused"),
    ("timed out", "timed out"),
    ("timeout", "timed out"),
    ("no route to host", "no route to host"),
    ("network is unreachable", "network unreachable"),
    ("connection abort", "connection aborted"),
    ("closed", "connection closed by peer"),
    ("got 0 bytes", "connection closed by peer"),
)


def _reason(text: str, default: str) -> str:
    low = text[:300].lower()
    for needle, reason in _REASONS:
        if needle in low:
            return reason
    return default


def _peer(line: str, rank=None, endpoint=(None, None), reason="") -> PeerFact | None:
    addr, host = endpoint
    if rank is None and addr is None and host is None:
        return None
    return PeerFact(
        peer_rank=rank, peer_addr=addr, peer_host=host, reason=reason, line=line[:LINE_CAP]
    )


def _rank_peer(line: str) -> PeerFact | None:
    """Forms that name a peer by rank."""
    i = line.find(" failed to pass monitoredBarrier")
    if i >= 0:
        # "[Rank 0]: Rank 1 failed ..." or "[Rank 0]: Ranks 1, 2 failed ..." (first one kept)
        head = line[max(0, i - _RANK_LIST_CAP) : i]
        j = max(head.rfind("Rank "), head.rfind("Ranks "))
        ranks = _rank_list(head[j:].split(" ", 1)[-1]) if j >= 0 else []
        if ranks:
            return _peer(line, rank=ranks[0], reason="did not reach the monitored barrier")
    key = "waiting for send/recv from rank "
    i = line.find(key)
    if i >= 0:
        return _peer(line, rank=_int_at(line, i + len(key)), reason="monitored barrier failed")
    key = "retrieving ncclUniqueId from ["
    i = line.find(key)
    if i >= 0 and "got error" in line:
        tail = line[line.find("got error", i) : line.find("got error", i) + 200]
        return _peer(line, rank=_int_at(line, i + len(key)), reason=_reason(tail, "store error"))
    return None


# NCCL: (substring, offset from its start to the peer, default reason)
_NCCL_PEER_KEYS = (
    ("Got completion from peer ", "remote process exited or network error"),
    ("Connection closed by remote peer ", "connection closed by peer"),
    ("Call to recv from ", "receive failed"),
    ("Connect to ", "connect failed"),
    ("connect to ", "connect failed"),
)
# gloo: "<what> [addr]:port"
_GLOO_PEER_KEYS = (
    ("Connection closed by peer ", "connection closed by peer"),
    ("Socket unexpectedly closed ", "connection closed by peer"),
    ("Read error ", "read error"),
    ("Read timeout ", "timed out"),
    ("Write timeout ", "timed out"),
    ("Connect timeout ", "timed out"),
    ("writev ", "write error"),
)


def _nccl_socket_peer(line: str) -> PeerFact | None:
    for key, default in _NCCL_PEER_KEYS:
        i = line.find(key)
        if i < 0:
            continue
        start = i + len(key)
        tail = line[start : start + 400]
        if key == "Got completion from peer ":
            reason = default
        elif key.lower() == "connect to ":
            if "retrying" in tail or ("failed" not in tail and "exceeded" not in tail):
                continue  # a retry in progress is not yet trouble
            reason = _reason(tail.split(" returned ", 1)[-1].split(" failed", 1)[-1], default)
        elif key == "Call to recv from ":
            reason = _reason(tail.split(" failed", 1)[-1], default)
        else:
            reason = default
        fact = _peer(line, endpoint=_nccl_peer(line, start), reason=reason)
        if fact:
            return fact
    return None


def _gloo_peer(line: str) -> PeerFact | None:
    for key, default in _GLOO_PEER_KEYS:
        i = line.find(key + "[")
        if i < 0:
            continue
        start = i + len(key)
        tail = line[start : start + 400]
        reason = _reason(tail.split("]", 1)[-1], default) if default == "read error" else default
        fact = _peer(line, endpoint=_bracket_peer(line, start), reason=reason)
        if fact:
            return fact
    return None


_C10D_CONNECT = re.compile(r"while trying to connect to \(([^,()\s]{1,260}), \d{1,5}\)")


def _c10d_peer(line: str) -> PeerFact | None:
    """c10d client sockets and the TCPStore."""
    i = line.find("while trying to connect to (")
    if i >= 0:
        m = _C10D_CONNECT.match(line, i, i + 320)
        if m:
            return _peer(
                line, endpoint=_endpoint(m.group(1)), reason=_reason(line[:i], "connect failed")
            )
    key = "failed to connect/validate to host "
    i = line.find(key)
    if i >= 0:
        start = i + len(key)
        token = line[start : start + 300].split(" ", 1)
        hostport = token[0].rsplit(":", 1)[0] if token else ""
        rest = token[1] if len(token) > 1 else ""
        return _peer(line, endpoint=_endpoint(hostport), reason=_reason(rest, "connect failed"))
    i = line.find("remote=[")
    if i >= 0 and ("Failed to recv" in line or "failed to recv" in line or "Connection" in line):
        return _peer(
            line, endpoint=_bracket_peer(line, i + 7), reason=_reason(line[i:], "store error")
        )
    return None


_PEER_GUARDS = (
    "from peer ",
    "closed by remote peer ",
    "closed by peer ",
    "Call to recv from ",
    "onnect to ",
    "error [",
    "timeout [",
    "closed [",
    "writev [",
    "monitoredBarrier",
    "ncclUniqueId from [",
    "connect/validate to host ",
    "remote=[",
)


def peer_fact(line: str) -> PeerFact | None:
    """The peer (rank, address or host) this line blames, with the reason in plain words."""
    for guard in _PEER_GUARDS:  # a plain loop: any() of a generator costs more per line
        if guard in line:
            break
    else:
        return None
    if "monitoredBarrier" in line or "ncclUniqueId from [" in line:
        fact = _rank_peer(line)
        if fact:
            return fact
    for finder in (_nccl_socket_peer, _gloo_peer, _c10d_peer):
        fact = finder(line)
        if fact:
            return fact
    return None


# --- nccl_config_fact -------------------------------------------------------------------------

_IPV4_TAIL = re.compile(r"(\d{1,3}(?:\.\d{1,3}){3})$")


def _if_and_addr(item: str) -> tuple[str, str | None]:
    """`eth0:10.0.0.1<0>` -> ("eth0", "10.0.0.1"); interface names may hold ':' (aliases)."""
    item = item.split("<", 1)[0]
    m = _IPV4_TAIL.search(item, max(0, len(item) - 15))
    if m and item[: m.start()].endswith(":"):
        return item[: m.start() - 1], m.group(1)
    colons = [i for i, c in enumerate(item[:100]) if c == ":"][:10]
    for c in colons:  # IPv6: the first split whose right-hand side is an address
        addr, _host = _endpoint(item[c + 1 :])
        if addr:
            return item[:c], addr
    return item, None


def _nccl_host(line: str, info: int) -> str | None:
    """Host of the `host:pid:tid [dev] NCCL INFO` prefix that ends at `info`."""
    head = line[max(0, info - 300) : info].rstrip()
    if not head.endswith("]"):
        return None
    j = head.rfind(" [")
    token = head[head.rfind(" ", 0, j) + 1 : j] if j > 0 else ""
    parts = token.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdecimal() or not parts[2].isdecimal():
        return None
    host = parts[0].rsplit(":", 1)[-1].rsplit("]", 1)[-1]
    return host if _HOSTNAME.fullmatch(host) else None


def _plugin_value(msg: str) -> str | None:
    low = msg.lower()
    for key in ("loaded net plugin ", "loaded coll plugin ", "loaded collnet plugin "):
        i = low.find(key)
        if i >= 0:
            name = msg[i + len(key) :].strip()[:120]
            return name if key == "loaded net plugin " else "collnet:" + name
    if "no plugin found" in low or "using internal" in low or "could not find" in low:
        return "internal"
    if "plugin load returned" in low or "plugin load (" in low:
        return "internal"
    return None


def _using_items(rest: str) -> tuple[list[str], list[str]]:
    """`[0]mlx5_1:1/IB [1]eth0:10.0.0.1<0> [RO]` -> (names, addresses), indices dropped."""
    names: list[str] = []
    addrs: list[str] = []
    for item in rest.split()[:64]:
        if item.startswith("[") and "]" in item[:8] and item[1 : item.find("]")].isdecimal():
            item = item[item.find("]") + 1 :]
        if "<" in item:
            name, addr = _if_and_addr(item)
            names.append(name)
            if addr:
                addrs.append(addr)
        elif item:
            names.append(item[:64])
    return names, addrs


def _config(host, key, value, addrs, line) -> NcclConfigFact:
    return NcclConfigFact(
        host=host, key=key, value=value[:200], addresses=tuple(addrs[:16]), line=line[:LINE_CAP]
    )


def _net_using(msg: str) -> tuple[str, list[str]] | None:
    """`NET/IB : Using [0]mlx5_1:1/IB ... ; OOB eth0:10.1.2.3<0>` / `NET/Socket : Using ...`."""
    slash = msg.find("/")
    colon = msg.find(": Using", slash)
    if slash != 3 or colon < 0 or colon > 24:
        return None
    transport = msg[4:colon].strip()
    rest = msg[colon + len(": Using") : colon + 4000]
    oob = ""
    if "; OOB " in rest:
        rest, oob_item = rest.split("; OOB ", 1)
        oob_name, oob_addr = _if_and_addr(oob_item.strip().split(" ", 1)[0])
        oob = "; OOB " + oob_name
        names, addrs = _using_items(rest)
        addrs += [oob_addr] if oob_addr else []
    else:
        names, addrs = _using_items(rest)
    return " ".join([transport, *names]) + oob, addrs


def _config_from_msg(msg: str) -> tuple[str, str, list[str]] | None:
    if msg.startswith("NCCL version "):
        version = msg[13:].split(None, 1)
        return ("version", version[0], []) if version else None
    if msg.startswith("cudaDriverVersion "):
        value = _int_at(msg, 18)
        return ("cuda_driver", str(value), []) if value is not None else None
    for prefix in ("Bootstrap : Using", "Bootstrap: Using"):
        if msg.startswith(prefix):
            names, addrs = _using_items(msg[len(prefix) : len(prefix) + 400])
            return ("bootstrap", " ".join(names), addrs) if names else None
    if msg.startswith("Using network "):
        return "net", msg[14:].strip()[:80], []
    if msg.startswith("Using internal Network "):  # NCCL 2.3 and older
        return "net", msg[23:].strip()[:80], []
    if msg.startswith("NET/Plugin") or msg.startswith("Assigned NET plugin "):
        if msg.startswith("Assigned NET plugin "):
            value = msg[20:].split(" to comm", 1)[0].strip()
        else:
            value = _plugin_value(msg)
        return ("net_plugin", value, []) if value else None
    if msg.startswith("Plugin Path : "):
        return "net_plugin", msg[14:].strip()[:200], []
    if msg.startswith("NET/") and ": Using" in msg[:30]:
        using = _net_using(msg)
        return ("interfaces", using[0], using[1]) if using else None
    return None


_BARE_PREFIX = re.compile(r"(?:\[[\w,.:-]{1,40}\](?:<\w{1,10}>)?:?\s?){0,3}")


def nccl_config_fact(line: str) -> NcclConfigFact | None:
    """What NCCL says it chose on this host, or None. `NCCL_* set by environment` lines are
    environment, read by logs.py, not here."""
    info = line.find("NCCL INFO ")
    if info >= 0:
        msg = line[info + 10 : info + 10 + 4000].strip()
        found = _config_from_msg(msg)
        if found is None:
            return None
        return _config(_nccl_host(line, info), *found, line)
    i = line.find("NCCL version ")
    if i < 0 or i > 120:
        return None
    # The bare version banner ("NCCL version 2.19.3+cuda12.3"), alone on its line after at most
    # a launcher prefix; PyTorch's "..., NCCL version 2.14.3" inside an error is not config.
    if not _BARE_PREFIX.fullmatch(line, 0, i):
        return None
    rest = line[i + 13 : i + 80].split()
    if len(rest) != 1 or len(line) - i > 80:
        return None
    return _config(None, "version", rest[0], [], line)


# --- slow_facts -------------------------------------------------------------------------------

_MEGATRON_MAX_RTT = re.compile(r"MxRtt/Rnk: (\d{1,12}(?:\.\d{1,6})?)[a-z]{0,3}/(\d{1,9})")
_VALUE_RANK = re.compile(r"(\d{1,12}(?:\.\d{1,6})?)/(\d{1,9})")
_STRAGGLER_ID = re.compile(r"rank=(\d{1,9})")


def _megatron(line: str) -> list[SlowFact]:
    facts: list[SlowFact] = []
    i = line.find("MxRtt/Rnk: ")
    if i >= 0:
        m = _MEGATRON_MAX_RTT.match(line, i, i + 60)
        if m:
            facts.append(SlowFact(int(m.group(2)), "megatron", float(m.group(1)), line[:LINE_CAP]))
    i = line.find("Ranks with lowest")
    if i >= 0:
        colon = line.find(":", i, i + 60)
        if colon >= 0:
            tail = line[colon + 1 : colon + 1 + _RANK_LIST_CAP]
            for m in _VALUE_RANK.finditer(tail):
                facts.append(
                    SlowFact(int(m.group(2)), "megatron", float(m.group(1)), line[:LINE_CAP])
                )
                if len(facts) >= MAX_FACTS:
                    break
    return facts


def _nvrx(line: str) -> list[SlowFact]:
    """nvidia-resiliency-ext: `STRAGGLER DETECTION WARNING: ... Affected ranks: {StragglerId(
    rank=3, node='n1'), ...}` (a set of ids) or `... Affected ranks: [76, 13, 45]`."""
    i = line.find("Affected ranks: ")
    if i < 0:
        return []
    tail = line[i + 16 : i + 16 + _RANK_LIST_CAP]
    if tail.startswith("{") or "StragglerId(" in tail[:40]:
        ranks = [int(m.group(1)) for m in _STRAGGLER_ID.finditer(tail)]
    elif tail.startswith("[") or tail.startswith("("):
        close = tail.find("]" if tail.startswith("[") else ")")
        ranks = _rank_list(tail[1:close]) if close > 0 else []
    else:
        ranks = []
    return [SlowFact(r, "nvrx", None, line[:LINE_CAP]) for r in ranks[:MAX_FACTS]]


def slow_facts(line: str) -> list[SlowFact]:
    """Ranks a straggler detector names as slow. Megatron's summary names the rank with the
    longest round trip on every report, healthy or not: judge the spread across reports."""
    if "MxRtt/Rnk: " in line or "Ranks with lowest" in line:
        return _megatron(line)
    if "STRAGGLER DETECTION WARNING" in line:
        return _nvrx(line)
    return []


@dataclass(frozen=True)
class CommInitFact:
    """NCCL's communicator set-up line: which process is which rank of how many.

    `host:pid:tid [dev] NCCL INFO comm 0x.. rank 2 nranks 8 cudaDev 2 ... - Init START` (and
    `Init COMPLETE`): the rank wrote it, so it was observed; its pid joins dmesg's OOM kills.
    """

    host: str | None
    pid: int | None
    rank: int
    nranks: int
    line: str


_COMM_INIT = re.compile(r" comm 0x[0-9a-f]{1,16} rank (\d{1,7}) nranks (\d{1,7}) ")


def comm_init_fact(line: str) -> CommInitFact | None:
    if " - Init " not in line or " nranks " not in line:
        return None
    info = line.find("NCCL INFO")
    if info < 0:
        return None
    m = _COMM_INIT.search(line, info, info + 200)
    if not m:
        return None
    host = _nccl_host(line, info)
    pid = None
    head = line[max(0, info - 300) : info]
    if host:
        rest = head[head.rfind(host) + len(host) + 1 :].split(":", 1)[0]
        pid = int(rest) if rest.isdecimal() and len(rest) <= 9 else None
    return CommInitFact(host, pid, int(m.group(1)), int(m.group(2)), line[:LINE_CAP])
