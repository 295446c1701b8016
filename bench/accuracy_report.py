"""The figures docs/accuracy.md reports, from the suites themselves.

    .venv/bin/python bench/accuracy_report.py            # print both tables
    .venv/bin/python bench/accuracy_report.py --write    # and refresh them in docs/accuracy.md

Corpus (tests/analysis/corpus/): per case, the classification and rank lists against
expected.json (`tests/analysis/test_corpus.py`'s comparison), and the naive reading written
beside it (`naive`: the first error line, rank 0, the rank with the traceback) where the case
has one. Atlas (tests/analysis/atlas/): per tool family, the entries whose line yields its
expected fact (`tests/analysis/test_atlas.py`'s check), out of all, and the distinct sources.
`--write` replaces what stands between each table's markers in docs/accuracy.md, nothing else.
Needs Django settings for the bundle reader (set here to the test settings; no database is
touched).
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass
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
CORPUS = REPO / "tests/analysis/corpus"
ATLAS = REPO / "tests/analysis/atlas"
ACCURACY = REPO / "docs/accuracy.md"
CORPUS_BEGIN = "<!-- corpus: begin (bench/accuracy_report.py) -->"
CORPUS_END = "<!-- corpus: end -->"
ATLAS_BEGIN = "<!-- atlas: begin (bench/accuracy_report.py) -->"
ATLAS_END = "<!-- atlas: end -->"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _link(url: str) -> str:
    """`[owner/name#N](url)` for a GitHub thread, the URL itself otherwise."""
    parts = url.split("/")
    if url.startswith("https://github.com/") and len(parts) >= 7 and parts[5] in ("issues", "pull"):
        return f"[{parts[3]}/{parts[4]}#{parts[6]}]({url})"
    if url.startswith("https://github.com/") and len(parts) >= 5:
        return f"[{'/'.join(parts[3:5])}/{parts[-1]}]({url})"
    if url.startswith("http"):
        return f"[{parts[2]}]({url})"
    return _cell(url)


def _verdict(classification: str, suspects: list[int]) -> str:
    return f"{classification}; suspects {suspects}" if suspects else f"{classification}"


@dataclass
class Case:
    name: str
    expected: dict
    got: dict
    want: dict

    @property
    def passed(self) -> bool:
        return self.got == self.want

    @property
    def naive(self) -> dict | None:
        return self.expected.get("naive")

    @property
    def naive_wrong(self) -> bool:
        naive = self.naive
        return naive is not None and (
            naive["classification"] != self.expected["classification"]
            or naive["suspect_ranks"] != self.expected["suspect_ranks"]
        )


def run_corpus(root: Path = CORPUS) -> list[Case]:
    cases = []
    for case in sorted(p for p in root.iterdir() if p.is_dir()):
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
        cases.append(Case(case.name, expected, got, want))
    return cases


def corpus_summary(cases: list[Case]) -> str:
    passed = sum(c.passed for c in cases)
    with_naive = [c for c in cases if c.naive is not None]
    wrong = [c for c in with_naive if c.naive_wrong]
    engine_right = sum(c.passed for c in wrong)
    known = [c for c in cases if c.expected.get("known_wrong")]
    text = (
        f"{len(cases)} cases; the engine is right on {passed} of {len(cases)}. "
        f"{len(with_naive)} cases state the naive reading; on {len(wrong)} of them it is wrong "
        f"(class or suspects), and the engine is right on {engine_right} of those {len(wrong)}."
    )
    if known:
        text += f" Known wrong: {', '.join(f'`{c.name}`' for c in known)}."
    return text


def corpus_markdown(cases: list[Case]) -> str:
    lines = [
        CORPUS_BEGIN,
        corpus_summary(cases),
        "",
        "| case | source | what the thread concluded | expected | naive reading | result |",
        "|---|---|---|---|---|---|",
    ]
    for case in cases:
        want = case.want
        expected = f"**{_verdict(want['classification'], want['suspect_ranks'])}**"
        if want["missing_ranks"]:
            expected += f"; missing {want['missing_ranks']}"
        if want["unobserved_ranks"]:
            expected += f"; unobserved {want['unobserved_ranks']}"
        if "suspect_nodes" in want:
            expected += f"; nodes {want['suspect_nodes']}"
        naive = case.naive
        if naive is None:
            naive_text = "-"
        else:
            naive_text = _verdict(naive["classification"], naive["suspect_ranks"])
            naive_text += " (**wrong**)" if case.naive_wrong else " (right)"
        if case.passed:
            result = "pass"
        else:
            got = case.got
            result = f"**FAIL** (got {_verdict(got['classification'], got['suspect_ranks'])})"
            if case.expected.get("known_wrong"):
                result += f": known wrong, {_cell(case.expected['known_wrong'])}"
        row = (
            f"| `{case.name}` | {_link(case.expected['source'])} | "
            f"{_cell(case.expected['concluded'])} | {expected} | {naive_text} | {result} |"
        )
        lines.append(row)
    lines.append(CORPUS_END)
    return "\n".join(lines)


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


def run_atlas(root: Path = ATLAS) -> tuple[dict[str, list[int]], dict[str, set[str]]]:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    sources: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text()) or []:
            family = entry["tool"]
            totals[family][1] += 1
            totals[family][0] += _yields(entry)
            sources[family].add(entry["source"])
    return dict(totals), dict(sources)


def atlas_markdown(totals: dict[str, list[int]], sources: dict[str, set[str]]) -> str:
    ok = sum(v[0] for v in totals.values())
    every = sum(v[1] for v in totals.values())
    distinct = set().union(*sources.values()) if sources else set()
    lines = [
        ATLAS_BEGIN,
        f"{every} atlas lines from {len(distinct)} distinct sources in {len(totals)} tool "
        f"families; {ok} of {every} yield the fact they are labelled with "
        f"({ok / every:.1%}).",
        "",
        "| family | lines | distinct sources | lines yielding their fact | recall | sources |",
        "|---|---|---|---|---|---|",
    ]
    for family in sorted(totals):
        good, all_ = totals[family]
        links = ", ".join(_link(s) for s in sorted(sources[family]))
        lines.append(
            f"| {family} | {all_} | {len(sources[family])} | {good} | {good / all_:.0%} | {links} |"
        )
    lines.append(ATLAS_END)
    return "\n".join(lines)


def refresh(text: str, begin: str, end: str, block: str) -> str:
    if begin not in text or end not in text:
        raise SystemExit(f"docs/accuracy.md has no {begin!r} ... {end!r} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + block + tail


def main(argv: list[str]) -> None:
    corpus = corpus_markdown(run_corpus())
    atlas = atlas_markdown(*run_atlas())
    print(corpus)
    print()
    print(atlas)
    if "--write" in argv:
        text = ACCURACY.read_text()
        text = refresh(text, CORPUS_BEGIN, CORPUS_END, corpus)
        text = refresh(text, ATLAS_BEGIN, ATLAS_END, atlas)
        ACCURACY.write_text(text)
        print(f"\nwrote {ACCURACY.relative_to(REPO)}")


if __name__ == "__main__":
    main(sys.argv[1:])
