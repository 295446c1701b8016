"""The `make run` demo: a lab cluster with a hung job, registered and with an incident open,
so a newcomer's first click on "Snapshot cluster" shows a real diagnosis."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DEMO_CLUSTER = "demo-lab"


@dataclass
class DemoSetup:
    ok: bool
    message: str
    incident_url: str = ""


def demo_start() -> DemoSetup:
    """Start (or reuse) the demo lab and register it. Never raises: says what is missing."""
    from clusters.importing import ImportRefused, cluster_import
    from incidents.models import Incident
    from incidents.services import incident_open

    try:
        from lab import demo
    except ImportError as exc:  # torch or the lab package missing
        return DemoSetup(False, f"The demo lab cannot load: {exc}")
    result = demo.start_demo()
    if not result.ok:
        return DemoSetup(False, result.message)
    data = json.loads(Path(result.nodes_json).read_text())
    data["cluster"]["name"] = DEMO_CLUSTER
    data["cluster"]["description"] = (
        f"The lab on this machine: {data.get('scenario')} — "
        f"{data.get('expected', {}).get('summary', '')}"
    )
    try:
        imported = cluster_import(data)
    except ImportRefused as exc:
        return DemoSetup(False, f"The demo lab started but could not be registered: {exc}")
    incident = (
        Incident.objects.filter(cluster=imported.cluster, status__in=["open", "investigating"])
        .order_by("-opened_at")
        .first()
    )
    if incident is None:
        incident = incident_open(
            opened_by=None,
            title="Demo: the training job on demo-lab stopped making progress",
            cluster=imported.cluster,
            severity="SEV2",
            description="Rank 0's log looks fine. Click Snapshot cluster to see why.",
            source="demo",
        )
    return DemoSetup(True, result.message, incident.get_absolute_url())


def demo_stop() -> list[str]:
    try:
        from lab import demo
    except ImportError:
        return []
    return demo.stop_demo()
