"""The GPU series read at the click kept parsed (collectors/gpumetrics.py, `GpuSeriesRecord`):
the merge after the last node decodes each node's kept parse instead of parsing its `dcgm`
artifact's JSON again, and the verdict is the one the artifacts give (compared JSON for JSON
with the kept parses deleted). A kept parse that is damaged, too big, of another version or
of another node's series, or whose artifact was replaced since, is refused and the artifact
parsed instead; the series read after the last node (and a bundle's own) keep none."""

from __future__ import annotations

import json
import logging
import zlib

import pytest

from bench import prometheus_stub
from collectors import gpuclick, gpumetrics, nodeparse, services
from collectors.models import Artifact, GpuSeriesRecord
from tests.collectors.test_gpu_metrics_click import _clicked
from tests.collectors.test_gpu_metrics_merge import WITH_DCGM, _dcgm, _snapshot, _verdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def parsed_here(monkeypatch) -> list[str]:
    """The nodes whose DCGM artifact the merge parses (not decoded from a kept parse)."""
    nodes: list[str] = []
    parse = gpumetrics.parse_dcgm

    def counted(node, text):
        nodes.append(node)
        return parse(node, text)

    monkeypatch.setattr(gpumetrics, "parse_dcgm", counted)
    return nodes


def _read_at_the_click(bob, cluster, url: str, title: str):
    snapshot = _clicked(bob, cluster, url, title)
    assert gpuclick.fetch_at_click(snapshot_id=snapshot.pk) is False
    gpuclick.series_before_analysis(snapshot_id=snapshot.pk, wait_s=0)
    return snapshot


def _series(snapshot) -> dict:
    merge = nodeparse.snapshot_parses(snapshot)
    assert merge.parsed_here == 0
    return {parse.node: parse.gpu_series for parse in merge.parses}


def test_the_kept_parses_are_decoded_and_the_verdict_is_the_one_the_artifacts_give(
    bob, cluster, parsed_here
):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _read_at_the_click(bob, cluster, url, "kept")
        after = _snapshot(bob, cluster, url, "read after the last node")
        gpuclick.series_before_analysis(snapshot_id=after.pk)
    kept = GpuSeriesRecord.objects.filter(collection__snapshot=snapshot)
    artifacts = Artifact.objects.filter(
        collection__snapshot=snapshot, name=gpumetrics.DCGM_ARTIFACT
    )
    assert sorted(kept.values_list("collection_id", "from_artifact")) == sorted(
        artifacts.values_list("collection_id", "pk")
    )
    assert not GpuSeriesRecord.objects.filter(collection__snapshot=after).exists()

    got = _verdict(snapshot)
    assert parsed_here == []  # both nodes' series decoded, none parsed
    kept.delete()
    expected, _ = services.snapshot_diagnosed(snapshot)  # the same analysis, made again
    assert sorted(parsed_here) == sorted(WITH_DCGM)
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert {row["source"] for row in got["gpu_shape"] if row["node"] in WITH_DCGM} == {"dcgm"}
    assert got == _verdict(after)


def _damage(record: GpuSeriesRecord, how: str, other: GpuSeriesRecord) -> None:
    if how == "not zlib":
        record.compressed = b"not zlib at all"
    elif how == "not JSON":
        record.compressed = zlib.compress(b'[2, ["node-0')
    elif how == "another shape":
        record.compressed = zlib.compress(json.dumps({"series": []}).encode())
    elif how == "over the bound":
        raw = b"[" + b" " * (gpumetrics.MAX_PARSED_BYTES + 1) + b"]"
        record.compressed = zlib.compress(raw)
    elif how == "another version":
        record.version += 1
    elif how == "another node's":
        record.compressed = other.compressed
    record.save()


@pytest.mark.parametrize(
    "how",
    ["not zlib", "not JSON", "another shape", "over the bound", "another version",
     "another node's"],
)  # fmt: skip
def test_a_kept_parse_that_does_not_hold_is_refused_and_the_artifact_parsed(
    bob, cluster, parsed_here, caplog, how
):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _read_at_the_click(bob, cluster, url, how)
    kept = GpuSeriesRecord.objects.filter(collection__snapshot=snapshot)
    expected = _series(snapshot)
    kept_of = {r.collection.node_name: r for r in kept.select_related("collection")}
    _damage(kept_of["node-001"], how, kept_of["node-000"])
    with caplog.at_level(logging.WARNING, logger="collectors.gpumetrics"):
        got = _series(snapshot)
    assert got == expected
    assert expected["node-001"] and {s.node for s in got["node-001"]} == {"node-001"}
    assert parsed_here == ["node-001"]  # the other still decoded
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"kept GPU series of collection {kept_of['node-001'].collection_id} not")


def test_an_artifact_replaced_since_is_parsed_not_its_kept_parse(bob, cluster, parsed_here):
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _read_at_the_click(bob, cluster, url, "replaced")
    artifact = Artifact.objects.get(
        collection__snapshot=snapshot, collection__node_name="node-001",
        name=gpumetrics.DCGM_ARTIFACT,
    )  # fmt: skip
    # Another writer's series in its place (a new row, as every store makes): all flat at 0 %.
    text = artifact.content.decode().replace('"100"', '"0"')
    assert text != artifact.content.decode()
    Artifact.objects.filter(pk=artifact.pk).delete()
    Artifact.objects.create(
        collection_id=artifact.collection_id, name=artifact.name,
        compressed=zlib.compress(text.encode()), size=len(text),
    )  # fmt: skip
    got = _series(snapshot)
    assert parsed_here == ["node-001"]
    assert got["node-001"] == gpumetrics.parse_dcgm("node-001", text)
    assert {s.reading for s in got["node-001"]} == {"idle"}


def test_a_node_past_the_kept_bound_is_stored_without_its_parse(
    bob, cluster, parsed_here, monkeypatch
):
    monkeypatch.setattr(gpumetrics, "MAX_PARSED_BYTES", 1000)  # under any node's 8 GPUs here
    with prometheus_stub.serving(WITH_DCGM, _dcgm) as url:
        snapshot = _read_at_the_click(bob, cluster, url, "too big")
    assert not GpuSeriesRecord.objects.filter(collection__snapshot=snapshot).exists()
    assert Artifact.objects.filter(
        collection__snapshot=snapshot, name=gpumetrics.DCGM_ARTIFACT
    ).count() == len(WITH_DCGM)
    got = _series(snapshot)
    assert sorted(parsed_here) == sorted(WITH_DCGM) and all(got[n] for n in WITH_DCGM)
