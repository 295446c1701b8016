"""The atlas: verbatim lines from public threads, each with the fact the line reader must yield.

Every file `tests/analysis/atlas/<family>.yaml` is a list of entries (the format is in
`tests/analysis/atlas/README.md` and issue 17's Interface 2). One test per entry: it passes when
some signal of `analysis.signals.read_text(text, LineSource(path, node, pid_ranks))` has the
expected kind and every expected field (`rank: null` means the signal must carry no rank).
The expectations were written from what each line says and what its thread concluded, never
from the reader's output. Plus the size checks: at least 300 entries from at least 100 distinct
threads across at least 15 tool families, and every entry well formed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ATLAS = Path(__file__).parent / "atlas"

FAMILIES = frozenset(
    {
        "pytorch-c10d",
        "pytorch-elastic",
        "pytorch-fsdp",
        "nccl",
        "nccl-ras",
        "deepspeed",
        "megatron-nemo",
        "lightning",
        "accelerate-hf",
        "torchtune-torchtitan",
        "ray",
        "slurm",
        "kubernetes-kubeflow",
        "mpi",
        "nvidia-xid",
        "mlx5-infiniband",
        "pyspy",
    }
)

# The kinds of issue 17's Interface 1. The reader may add kinds; the atlas uses only these.
SIGNAL_KINDS = frozenset(
    {
        "progress",
        "checkpoint",
        "exception",
        "fatal",
        "killed",
        "segfault",
        "oom",
        "gpu_oom",
        "xid",
        "exit",
        "timeout",
        "connection",
        "rendezvous",
        "init",
        "desync",
        "mismatch",
        "ras",
        "ras_ok",
        "straggler",
        "link",
        "node_state",
        "evicted",
        "nccl_config",
    }
)

ENTRY_KEYS = frozenset({"text", "source", "tool", "path", "node", "pid_ranks", "expect", "note"})
EXPECT_KEYS = frozenset({"kind", "rank", "node", "peer", "step", "code"})
INT_FIELDS = ("rank", "peer", "step", "code")
URL = re.compile(r"https?://[^\s]{4,400}")

MIN_ENTRIES = 300
MIN_SOURCES = 100
MIN_FAMILIES = 15


def _load() -> list[tuple[str, int, dict]]:
    entries = []
    for path in sorted(ATLAS.glob("*.yaml")):
        for index, entry in enumerate(yaml.safe_load(path.read_text()) or []):
            entries.append((path.stem, index, entry))
    return entries


ENTRIES = _load()
IDS = [f"{family}-{index:03d}" for family, index, _ in ENTRIES]


def test_atlas_has_enough_entries():
    assert len(ENTRIES) >= MIN_ENTRIES, f"{len(ENTRIES)} entries, want >= {MIN_ENTRIES}"


def test_atlas_has_enough_distinct_threads():
    sources = {entry["source"] for _, _, entry in ENTRIES}
    assert len(sources) >= MIN_SOURCES, f"{len(sources)} threads, want >= {MIN_SOURCES}"


def test_atlas_covers_enough_families():
    present = {family for family, _, _ in ENTRIES}
    assert len(present) >= MIN_FAMILIES, f"families present: {sorted(present)}"


def test_every_family_file_is_a_known_family():
    assert {path.stem for path in ATLAS.glob("*.yaml")} <= FAMILIES


@pytest.mark.parametrize(("family", "index", "entry"), ENTRIES, ids=IDS)
def test_entry_is_well_formed(family: str, index: int, entry: dict):
    assert isinstance(entry, dict) and set(entry) <= ENTRY_KEYS, sorted(entry)
    assert isinstance(entry.get("text"), str) and entry["text"].strip(), "no text"
    assert URL.fullmatch(entry.get("source", "")), f"source is not a URL: {entry.get('source')!r}"
    assert entry.get("tool") == family, "tool must name the file's family"
    for key in ("path", "node"):
        assert isinstance(entry.get(key, ""), str), key
    pid_ranks = entry.get("pid_ranks", {})
    assert isinstance(pid_ranks, dict), "pid_ranks must map pid -> rank"
    assert all(isinstance(p, int) and isinstance(r, int) for p, r in pid_ranks.items())
    expect = entry.get("expect")
    assert isinstance(expect, dict) and set(expect) <= EXPECT_KEYS, expect
    assert expect.get("kind") in SIGNAL_KINDS, f"unknown kind {expect.get('kind')!r}"
    for field in INT_FIELDS:
        value = expect.get(field)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool)), field
    assert expect.get("node") is None or isinstance(expect["node"], str), "node"


def _describe(signals) -> str:
    return "\n".join(
        f"  {s.kind} rank={s.rank} node={s.node} peer={s.peer} step={s.step} code={s.code}"
        f" | {s.text[:120]}"
        for s in signals
    )


@pytest.mark.parametrize(("family", "index", "entry"), ENTRIES, ids=IDS)
def test_line_yields_its_fact(family: str, index: int, entry: dict):
    # Imported here so the size and form checks above run even before the reader exists.
    from analysis.signals import LineSource, read_text

    source = LineSource(
        path=entry.get("path", ""),
        node=entry.get("node", ""),
        pid_ranks=entry.get("pid_ranks", {}),
    )
    signals = read_text(entry["text"], source)
    expect = entry["expect"]

    def matches(signal) -> bool:
        return all(getattr(signal, key) == want for key, want in expect.items())

    assert any(matches(s) for s in signals), (
        f"{family}[{index}] ({entry['source']})\n"
        f"want: {expect}\n"
        f"text: {entry['text'][:400]}\n"
        f"got:\n{_describe(signals) or '  (no signal)'}"
    )
