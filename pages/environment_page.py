"""The guided workflow's environment page: the suspect rank's environment beside a healthy
rank's (on another node if possible), read from the artifacts already collected, masked, for
responders only. The page's one read (`environment_page` -> `EnvironmentPage`); its view is
pages/guided.guided_env."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from analysis.diagnosis import Diagnosis
from analysis.records import RankRow
from collectors.models import Artifact, Snapshot
from hangdesk.masking import mask_environment
from incidents.models import Incident
from readings import questions

# Variables that differ per rank by design: shown, never counted as a difference.
PER_RANK_VARIABLES = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "CUDA_VISIBLE_DEVICES",
        "TORCHELASTIC_ERROR_FILE",
        "HOSTNAME",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_PROCID",
        "SLURM_LOCALID",
    }
)


@dataclass(frozen=True)
class EnvironmentPage:
    incident: Incident
    snapshot: Snapshot
    suspect: questions.Suspect
    healthy: RankRow | None  # the rank compared with (None: no healthy rank)
    missing: bool  # one of the two environments was not collected
    rows: list[dict]  # one a variable, differences first (env_rows)
    differ_count: int

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def environment_page(snapshot: Snapshot) -> EnvironmentPage:
    """`snapshot` with its incident. At most two queries (each rank's environ artifact)."""
    diagnosis = snapshot.read_diagnosis() or Diagnosis.empty()
    who = questions.suspect(diagnosis)
    healthy = questions.healthy_rank(diagnosis)
    suspect_env = _environ(snapshot, who.row)
    healthy_env = _environ(snapshot, healthy) if healthy else None
    rows = env_rows(suspect_env or {}, healthy_env or {})
    return EnvironmentPage(
        incident=snapshot.incident,
        snapshot=snapshot,
        suspect=who,
        healthy=healthy,
        missing=suspect_env is None or healthy_env is None,
        rows=rows,
        differ_count=sum(1 for r in rows if r["differs"]),
    )


def _environ(snapshot: Snapshot, row: RankRow | None) -> dict[str, str] | None:
    if row is None or not row.node or not row.pid:
        return None
    found = Artifact.objects.filter(
        collection__snapshot=snapshot, collection__node_name=row.node, name=f"environ/{row.pid}"
    ).first()
    if found is None:
        return None
    text = found.content.decode("utf-8", "replace")
    env = dict(entry.split("=", 1) for entry in text.split("\0") if "=" in entry)
    return mask_environment(env)


def env_rows(suspect: dict[str, str], healthy: dict[str, str]) -> list[dict]:
    """One row per variable: both values (masked), whether they differ, and whether they
    differ by design (RANK, LOCAL_RANK, ...). Differences first."""
    rows = []
    for name in sorted(set(suspect) | set(healthy)):
        a, b = suspect.get(name), healthy.get(name)
        per_rank = name in PER_RANK_VARIABLES
        rows.append(
            {"name": name, "suspect": a, "healthy": b, "differs": a != b and not per_rank,
             "per_rank": per_rank}
        )  # fmt: skip
    return sorted(rows, key=lambda r: (not r["differs"], r["name"]))
