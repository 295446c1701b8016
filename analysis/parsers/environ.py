"""Raw /proc/PID/environ (NUL-separated) and the variables the analysis cares about."""

from __future__ import annotations

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
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name:
            bad += 1
            continue
        env[name] = value
    if bad:
        problems.append(f"{bad} environ entries without NAME=value")
    return env, problems


def int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None
