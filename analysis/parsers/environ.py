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
    found = _subset_pattern(names, prefixes, separator).findall(f"{separator}{text}{separator}")
    # A wanted entry gives (name, value); an entry parse_environ calls bad gives ("", "").
    bad = found.count(("", ""))
    env = dict(found)
    if bad:
        del env[""]
    return env, [f"{bad} environ entries without NAME=value"] if bad else []


_SUBSET_PATTERNS: dict[tuple, re.Pattern] = {}


def _subset_pattern(names, prefixes, separator: str) -> re.Pattern:
    key = (names, prefixes, separator)
    pattern = _SUBSET_PATTERNS.get(key)
    if pattern is None:
        sep = re.escape(separator)
        wanted = [f"{re.escape(p)}[^{sep}=]*+" for p in prefixes]
        wanted += [re.escape(n) for n in sorted(names, key=len, reverse=True)]
        # After a separator (the one ending an entry is left for the next): a wanted NAME=value,
        # or a bad entry ("=value", or no "=" at all); other entries do not match. Possessive
        # runs keep the scan linear.
        pattern = re.compile(f"{sep}(?:({'|'.join(wanted)})=([^{sep}]*+)|=|[^{sep}=]++(?={sep}))")
        _SUBSET_PATTERNS[key] = pattern
    return pattern


def int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None
