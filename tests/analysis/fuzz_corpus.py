"""Mutation fuzzing of every parser and of the bundle reader, seeded from real captured
evidence (tests/analysis/samples, tests/analysis/corpus).

`run(seed, rounds)` mutates each sample `rounds` times (flip, insert, delete, repeat a span,
insert a token taken from the parsers' own regexes or a known troublemaker, truncate, splice two
samples) and hands the result to the parser for that kind of file; whole bundles are mutated
before and after compression and read with `read_bundle_bytes`, then diagnosed. A parser may
report problems; it may not raise. The bundle reader may refuse (BundleRefused); nothing else.
Run in a child under RLIMIT_AS / RLIMIT_CPU by tests/analysis/test_fuzz_parsers.py.
"""

from __future__ import annotations

import gzip
import json
import random
import traceback
from collections.abc import Callable
from pathlib import Path

import analysis
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.parsers.dmesg import parse_dmesg
from analysis.parsers.environ import parse_environ, parse_environ_subset
from analysis.parsers.flight_recorder import parse_flight_recorder
from analysis.parsers.logs import parse_log
from analysis.parsers.nvidia_smi import parse_nvidia_smi
from analysis.parsers.ps import parse_ps
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.parsers.shell_init import parse_shell_init
from analysis.snapshot_parse import COMMS_PREFIXES, RENDEZVOUS
from analysis.stacks import stack_signature
from collectors.bundles import BundleRefused, read_bundle, read_bundle_bytes, write_bundle
from hangdesk.frames import parse_probe_output
from tests.analysis.adversarial_lines import literals, module_patterns

WANTED = frozenset(RENDEZVOUS | {"RANK", "LOCAL_RANK", "WORLD_SIZE"})
PREFIXES = COMMS_PREFIXES
HERE = Path(__file__).parent
SAMPLES = HERE / "samples"
CORPUS = HERE / "corpus"
PARSER_MODULES = [
    "analysis.parsers.dmesg",
    "analysis.parsers.launchers",
    "analysis.parsers.logs",
    "analysis.parsers.nccl",
    "analysis.parsers.pyspy",
    "analysis.parsers.shell_init",
]
TROUBLE = [
    b"\xc2\xb2",  # superscript two: isdigit() but not int()
    "٣".encode(),
    b"9" * 5000,
    b"\0",
    b"\xff\xfe",
    b"[" * 3000,
    b"{" * 3000,
    b"\r",
    b"\n" * 50,
    b" " * 4000,
    "\u2028".encode(),
    b"-1",
    b"NaN",
    b"1e999",
]


def _tokens() -> list[bytes]:
    found = set(TROUBLE)
    for module in PARSER_MODULES:
        for pattern in module_patterns(module).values():
            found.update(piece.encode("utf-8", "surrogatepass") for piece in literals(pattern))
    return sorted(found)


def mutate(data: bytes, rng: random.Random, tokens: list[bytes], other: bytes) -> bytes:
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(data))
        end = min(len(data), at + rng.randint(0, 64))
        kind = rng.randrange(7)
        if kind == 0 and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
        elif kind == 1:
            data = data[:at] + rng.randbytes(rng.randint(1, 16)) + data[at:]
        elif kind == 2:
            data = data[:at] + data[end:]
        elif kind == 3:
            data = data[:at] + data[at:end] * rng.randint(2, 2000) + data[end:]
        elif kind == 4:
            data = data[:at] + rng.choice(tokens) * rng.choice((1, 1, 2, 50)) + data[at:]
        elif kind == 5:
            data = data[:at]
        else:
            cut = rng.randint(0, len(other))
            data = data[:at] + other[cut:]
    return data


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _pyspy(data: bytes) -> None:
    threads, _problems = parse_pyspy(_text(data))
    thread = main_thread(threads)
    if thread is not None:
        stack_signature(thread.frames)


READERS: dict[str, Callable[[bytes], object]] = {
    "log": lambda data: parse_log("/var/log/train/rank3.log", _text(data)),
    "dmesg": lambda data: parse_dmesg(_text(data)),
    "nvidia": lambda data: parse_nvidia_smi(_text(data)),
    "ps": lambda data: parse_ps(_text(data)),
    "environ": lambda data: (parse_environ(data), parse_environ_subset(data, WANTED, PREFIXES)),
    "pyspy": _pyspy,
    "shell": lambda data: parse_shell_init(_text(data)),
    "fr": lambda data: parse_flight_recorder("fr/trace_rank_3", data),
    "probe": lambda data: parse_probe_output("gpu-0", data),
}


def kind_of(path: Path) -> str | None:
    name, parent = path.name, path.parent.name
    if parent == "fr" or parent == "flight_recorder":
        return "fr"
    if name.startswith("pyspy") or parent == "pyspy":
        return "pyspy"
    if name.startswith("environ") or parent == "environ":
        return "environ"
    rules = (("dmesg", "dmesg"), ("nvidia", "nvidia"), ("ps.txt", "ps"), ("shell", "shell"))
    for prefix, kind in rules:
        if name.startswith(prefix):
            return kind
    if name.endswith((".log", ".txt")) or parent in ("logs", "launchers", "nccl_wild"):
        return "log"
    return None


def samples() -> list[tuple[str, Path]]:
    found = []
    for root in (SAMPLES, CORPUS):
        for path in sorted(root.rglob("*")):
            kind = kind_of(path) if path.is_file() else None
            if kind and path.stat().st_size < 2_000_000:
                found.append((kind, path))
    return found


def _bundle_round(case: Path, rng: random.Random, tokens: list[bytes]) -> None:
    archive = write_bundle(read_bundle(case))
    raw = gzip.decompress(archive)
    mutated = mutate(raw, rng, tokens, archive)
    if rng.random() < 0.5:
        mutated = gzip.compress(mutated, 1)
    try:
        evidence = read_bundle_bytes(mutated)
    except BundleRefused:
        return
    json.dumps(analysis.diagnose(evidence).to_json())


def run(seed: int, rounds: int, bundle_rounds: int) -> dict:
    rng = random.Random(seed)
    tokens = _tokens()
    found = samples()
    by_kind: dict[str, list[bytes]] = {}
    for kind, path in found:
        by_kind.setdefault(kind, []).append(path.read_bytes())
    failures: list[str] = []
    runs = 0
    for kind, path in found:
        data = path.read_bytes()
        for _ in range(rounds):
            mutated = mutate(data, rng, tokens, rng.choice(by_kind[kind]))
            runs += 1
            try:
                READERS[kind](mutated)
                if kind != "probe" and rng.random() < 0.2:
                    READERS["probe"](mutated)
            except Exception:  # every escape is a finding; keep going to find them all
                failures.append(f"{kind} {path.name}: {traceback.format_exc(limit=3)[-600:]}")
    cases = sorted(p for p in CORPUS.iterdir() if p.is_dir())
    for index in range(bundle_rounds):
        case = cases[index % len(cases)]
        runs += 1
        try:
            _bundle_round(case, rng, tokens)
        except Exception:
            failures.append(f"bundle {case.name}: {traceback.format_exc(limit=4)[-800:]}")
    _diagnose_mutated_snapshot(rng, tokens, by_kind, failures)
    return {"samples": len(found), "runs": runs, "failures": failures[:20], "failed": len(failures)}


def _diagnose_mutated_snapshot(rng, tokens, by_kind, failures) -> None:
    """One snapshot of mutated evidence of every kind at once, through the whole analysis."""
    for _ in range(20):
        pick = {
            kind: mutate(rng.choice(items), rng, tokens, b"") for kind, items in by_kind.items()
        }
        node = NodeEvidence(
            node="gpu-0",
            ps=_text(pick.get("ps", b"")),
            environ={7: pick.get("environ", b"")},
            pyspy={7: _text(pick.get("pyspy", b""))},
            dmesg=_text(pick.get("dmesg", b"")),
            nvidia_smi=_text(pick.get("nvidia", b"")),
            logs={"/var/log/rank0.log": _text(pick.get("log", b""))},
            flight_recorder={"/fr/trace_rank_0": pick.get("fr", b"")},
            shell_init=_text(pick.get("shell", b"")),
        )
        try:
            json.dumps(analysis.diagnose(SnapshotEvidence(nodes=[node])).to_json())
        except Exception:
            failures.append(f"snapshot: {traceback.format_exc(limit=4)[-800:]}")
