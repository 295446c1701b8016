"""Versions of the stored diagnosis, and the upgrade of an older one to the current version.

Diagnoses are stored as JSON (collectors.Snapshot.diagnosis) and outlive the code that wrote
them. Each version's changes are written here once, as a step from the version before;
`Diagnosis.from_json` runs the steps a stored diagnosis needs and reads the result, so no
reader ever sees an older shape. Upgrading keeps the verdict the responders saw (and may have
confirmed); it never re-analyses the evidence behind their back.

1  (no `schema_version`): the first analysis. A rank the evidence said nothing about was
   called missing; no rule name, no next steps, no NCCL configuration differences.
2  rules over facts: missing only on positive evidence, the rest `unobserved_ranks`;
   `next_steps`, `rule`, `nccl_config_diffs`, `progress.step_time_s`.
3  the typed contract (analysis/records.py): one RankStatus for every reader, per-rank rows
   and stack groups as typed records, `progress` with every field; the verdict's `check`
   (what would confirm it), `alternatives` and `findings` (what every rule found).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

DIAGNOSIS_SCHEMA_VERSION = 3


def stored_version(stored: Mapping[str, Any]) -> int:
    """The version a stored diagnosis was written in (1 when it says none)."""
    version = stored.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > 1:
        return version
    return 1


def _from_1(data: dict[str, Any]) -> dict[str, Any]:
    # Schema 1 named no rule and no next steps, and had no notion of "unobserved": the ranks
    # it called missing stay missing (that is what it told the responders).
    data.setdefault("next_steps", [])
    data.setdefault("rule", "")
    data.setdefault("unobserved_ranks", [])
    data.setdefault("unobserved_ranks_compact", "")
    data.setdefault("nccl_config_diffs", [])
    return data


def _from_2(data: dict[str, Any]) -> dict[str, Any]:
    # Same fields; 3 types them. Nothing to move.
    return data


# version -> the step that turns it into the next version.
_STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _from_1, 2: _from_2}


def upgrade(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `stored` in the current version's shape. A diagnosis from a newer version
    (a console rolled back) is read as it is: its known fields still mean the same."""
    data = dict(stored)
    version = stored_version(stored)
    while version < DIAGNOSIS_SCHEMA_VERSION:
        data = _STEPS[version](data)
        version += 1
    data["schema_version"] = max(version, DIAGNOSIS_SCHEMA_VERSION)
    return data
