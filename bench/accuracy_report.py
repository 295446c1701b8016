"""The figures docs/accuracy.md reports, from the suites themselves.

    .venv/bin/python bench/accuracy_report.py

Atlas (tests/analysis/atlas/): per tool family, the entries whose line yields its expected
fact (`tests/analysis/test_atlas.py`'s check), out of all, and the distinct sources. Corpus
(tests/analysis/corpus/): per case, the classification and rank lists against expected.json
(`tests/analysis/test_corpus.py`'s comparison). Needs Django settings for the bundle reader
(set here to the test settings; no database is touched).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.test")

import django  # noqa: E402
import yaml  # noqa: E402

django.setup()

from analysis import diagnose  # noqa: E402
from analysis.signals import LineSource, read_text  # noqa: E402
from collectors.bundles import read_bundle  # noqa: E402

RANK_FIELDS = ("suspect_ranks", "missing_ranks", "unobserved_ranks")


def _yields(entry: dict) -> bool:
    source = LineSource(
        path=entry.get("path") or "",
        node=entry.get("node") or "",
        pid_ranks={int(k): int(v) for k, v in (entry.get("pid_ranks") or {}).items()},
    )
    want = entry["expect"]
    for signal in read_text(entry["text"], source):
        if signal.kind != want["kind"]:
            continue
        if all(getattr(signal, k) == v for k, v in want.items() if k != "kind"):
            return True
    return False


def atlas() -> None:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    sources: dict[str, set[str]] = defaultdict(set)
    for path in sorted((REPO / "tests/analysis/atlas").glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text()) or []:
            family = entry["tool"]
            totals[family][1] += 1
            totals[family][0] += _yields(entry)
            sources[family].add(entry["source"])
    print("| family | entries | distinct sources | lines yielding their fact | recall |")
    print("|---|---|---|---|---|")
    for family in sorted(totals):
        ok, all_ = totals[family]
        print(f"| {family} | {all_} | {len(sources[family])} | {ok} | {ok / all_:.0%} |")
    ok = sum(v[0] for v in totals.values())
    all_ = sum(v[1] for v in totals.values())
    every = set().union(*sources.values())
    print(f"| **all** | {all_} | {len(every)} | {ok} | {ok / all_:.1%} |")


def corpus(root: Path) -> None:
    passed = 0
    cases = sorted(p for p in root.iterdir() if p.is_dir())
    print("| case | source | expected | got | result |")
    print("|---|---|---|---|---|")
    for case in cases:
        expected = json.loads((case / "expected.json").read_text())
        result = diagnose(read_bundle(case)).to_json()
        got = {"classification": result["classification"]}
        want = {"classification": expected["classification"]}
        for field in RANK_FIELDS:
            got[field] = sorted(result[field])
            want[field] = expected[field]
        if "suspect_nodes" in expected:
            got["suspect_nodes"] = sorted(result["suspect_nodes"])
            want["suspect_nodes"] = sorted(expected["suspect_nodes"])
        ok = got == want
        passed += ok
        short = f"{want['classification']}; suspects {want['suspect_ranks']}"
        mine = f"{got['classification']}; suspects {got['suspect_ranks']}"
        verdict = "pass" if ok else "FAIL"
        print(f"| `{case.name}` | {expected['source']} | {short} | {mine} | {verdict} |")
    print(f"\n{passed} of {len(cases)} cases pass")


if __name__ == "__main__":
    atlas()
    print()
    corpus(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tests/analysis/corpus")
