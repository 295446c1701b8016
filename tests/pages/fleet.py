"""A stored diagnosis the size of a fleet: a real one (the lab's `outside` capture) with its
per-rank table widened to N ranks, 8 a node, one rank outside the collective (the suspect) and
one missing, as the pages read them."""

from __future__ import annotations

import copy

from django.utils import timezone

from collectors.models import Snapshot, SnapshotStatus
from collectors.services import rank_overview
from tests.analysis.sample_evidence import diagnosis_json, load_snapshot


def fleet_diagnosis(world: int, *, suspect: int, missing: int) -> dict:
    diagnosis = diagnosis_json(load_snapshot("outside"))
    rows = diagnosis["per_rank"]
    healthy = next(r for r in rows if r["status"] == "in_collective")
    outside = next(r for r in rows if r["status"] == "outside")
    gone = {
        **healthy,
        "status": "missing",
        "pid": None,
        "state": "",
        "frame": "",
        "last_step": None,
    }
    wide = []
    for rank in range(world):
        source = outside if rank == suspect else gone if rank == missing else healthy
        row = copy.copy(source)
        row.update(rank=rank, node=f"node-{rank // 8:04d}", local_rank=rank % 8)
        row["suspect"] = rank == suspect
        wide.append(row)
    diagnosis.update(per_rank=wide, world_size=world, ranks_seen=world - 1)
    diagnosis.update(suspect_ranks=[suspect], missing_ranks=[missing])
    return diagnosis


def fleet_snapshot(incident, cluster, diagnosis: dict, *, overview: bool = True) -> Snapshot:
    return Snapshot.objects.create(
        incident=incident, cluster=cluster, status=SnapshotStatus.DONE,
        finished_at=timezone.now(), diagnosis=diagnosis,
        rank_overview=rank_overview(diagnosis) if overview else None,
    )  # fmt: skip
