"""The line reader's first look: could a line state anything at all?

Most lines of a log state nothing the readers look for, and this is all they cost: one search
of one expression, the triggers below factored as a trie. Every stem a reader of
`analysis.signals.kinds` checks contains one of them (tests/analysis/test_signals.py holds
them to it), so a line without any is a line none of them would read.
"""

from __future__ import annotations

import re

# What a line about a network link or NVLink names (analysis/signals/cluster.py reads them).
LINK_TOPIC = (
    "mlx5",
    "infiniband",
    "nvlink",
    " ib",
    "ib0",
    "ibv_",
    "hca",
    "rdma",
    "nic link",
    "net/ib",
)
TRIGGERS = (
    "err",
    "fail",
    "nccl",
    "tim",
    "exit",
    "kill",
    "sig",
    "oom",
    "memor",
    "conn",
    "exception",
    "abort",
    "fatal",
    "terminat",
    "dead",
    "died",
    "crash",
    "store",
    "rendezv",
    "socket",
    "peer",
    "down",
    "node",
    "state",
    "ready",
    "drain",
    "lost",
    "xid",
    "fallen",
    "pipe",
    "route",
    "unreach",
    "eof",
    "got 0",
    "etcd",
    "master_addr",
    "init_process",
    "eaddrinuse",
    "address already",
    "collective",
    "joined but",
    "stalled",
    "problematic",
    "send/recv",
    "barrier",
    "fingerprint",
    "mismatch",
    "inconsistent",
    "rnk",
    "straggl",
    *LINK_TOPIC,
    "status=12",
    "retry",
    "responding",
    "unknown",
    "reason set",
    "unhealthy",
    "evict",
    "preempt",
    "spot",
    "low on resource",
    "checkpoint",
    "torch.save",
    "dcp.save",
    "set by environment",
    "core dump",
    "panic",
    "what():",
    "assert",
    "illegal",
    "floating point",
    "cublas",
    "cudnn",
    "uncorrectable",
    "cpuallocator",
    "deadline",
    "watchdog",
    "return code",
    "seg",
    "cancel",
    " due to ",
    "interrupt",
    "stopiteration",
    "with lowest",
    "missing ranks",
    "stalled ranks",
    "lagging",
    "subset of",
    "remote pro",
    "non-zero",
    "could not",
    "calloc",
    "malloc",
    "cuda",
    "[f",
    "stuck",
    "entire process",
    "closed",
    "traceback",  # a traceback's frames and quoted source must be seen to be skipped
    'file "',
)


def trie_pattern(words: tuple[str, ...]) -> str:
    """One expression that finds any of `words`, factored as a trie (`e(?:rr|xit|...)`): each
    position of a line costs one branch per first letter instead of one try per word, and
    with no repetition at all it is linear. A word that is a prefix of another suffices."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node:
            return ""
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


_TRIGGER = re.compile(trie_pattern(TRIGGERS))


def holds_any(low: str, words: tuple[str, ...]) -> bool:
    """Whether `low` holds any of `words`: the readers' many small tests of every triggered
    line, as a plain loop (`any()` of a generator costs more than the tests themselves)."""
    for word in words:  # noqa: SIM110
        if word in low:
            return True
    return False


def may_say_anything(low: str) -> bool:
    """A cheap first look: could `classify` (or the exception reader) find anything in this
    lower-cased line?"""
    return _TRIGGER.search(low) is not None
