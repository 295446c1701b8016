"""Raw /proc/PID/environ (NUL-separated) and the variables the analysis cares about."""

from __future__ import annotations

import re

# Prefixes whose disagreement across ranks breaks or changes a collective.
COMMS_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "GLOO_")


def parse_environ(raw: bytes | str | None) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    problems: list[str] = []
    if not raw:
        return env, problems
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    # Some collectors hand over `env` output (newline-separated) instead of the raw file.
    separator = "\0" if "\0" in text else "\n"
    bad = 0
    for item in text.split(separator):
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
        elif item:
            bad += 1
    if bad:
        problems.append(f"{bad} environ entries without NAME=value")
    return env, problems


def parse_environ_subset(
    raw: bytes | str | None, names: frozenset[str], prefixes: tuple[str, ...]
) -> tuple[dict[str, str], list[str]]:
    """`parse_environ` kept to `names` and the variables starting with one of `prefixes`: the
    same values (the last of repeated names), order and problems, without building the whole
    environment of every rank."""
    if not raw:
        return {}, []
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    separator = "\0" if "\0" in text else "\n"
    wanted, bad_entry = _subset_patterns(names, prefixes, separator)
    framed = f"{separator}{text}{separator}"
    env = dict(wanted.findall(framed))
    bad = len(bad_entry.findall(framed))
    return env, [f"{bad} environ entries without NAME=value"] if bad else []


_SUBSET_PATTERNS: dict[tuple, tuple[re.Pattern, re.Pattern]] = {}


def _subset_patterns(names, prefixes, separator: str) -> tuple[re.Pattern, re.Pattern]:
    key = (names, prefixes, separator)
    patterns = _SUBSET_PATTERNS.get(key)
    if patterns is None:
        sep = re.escape(separator)
        alternatives = [f"{re.escape(p)}[^{sep}=]*+" for p in prefixes]
        alternatives += [re.escape(n) for n in sorted(names, key=len, reverse=True)]
        # An entry is NAME=value after a separator (the one before the next entry is left for
        # it); possessive runs keep both scans linear.
        wanted = re.compile(f"{sep}((?:{'|'.join(alternatives)}))=([^{sep}]*+)")
        # Entries that parse_environ counts as bad: "=value", or no "=" at all.
        bad_entry = re.compile(f"{sep}(?:=|[^{sep}=]++(?={sep}))")
        patterns = _SUBSET_PATTERNS[key] = (wanted, bad_entry)
    return patterns


def int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None
