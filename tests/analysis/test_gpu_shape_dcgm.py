"""DCGM series as stored (collectors/gpumetrics.py, or a bundle's dcgm.json) read point by point:
Prometheus's values are strings, a bundle's may be anything; what is not a number of a sane size
is skipped, never raised (a bundle is untrusted input, and the merge reads every node's hour)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from analysis import codec, gpushape


def _stored(*series: dict) -> str:
    return json.dumps({"source": "prometheus", "series": list(series)})


def _util(values, gpu: str = "0", uuid: str = "GPU-a") -> dict:
    return {"metric": "DCGM_FI_DEV_GPU_UTIL", "gpu": gpu, "UUID": uuid, "values": values}


def test_values_read_as_numbers_and_the_rest_skipped():
    text = _stored(
        _util([[1, "100"], [2, " 97 "], [3, "99 %"], [4, "NaN"], [5, "1e13"], [6, True],
               [7, 42], [8, "[N/A]"], [10**400, "1"], ["9", "1"], [9], [10.5, "3"]]),
    )  # fmt: skip
    (series,) = gpushape.parse_dcgm("n0", text)
    assert [(p.at.timestamp(), p.util) for p in series.points] == [
        (1.0, 100), (2.0, 97), (3.0, 99), (7.0, 42), (10.5, 3),
    ]  # fmt: skip
    assert series.points[0].at == datetime.fromtimestamp(1, UTC)


def test_metrics_of_one_gpu_merge_by_instant_and_a_gpu_without_a_point_is_not_listed():
    memory = {"metric": "DCGM_FI_DEV_FB_USED", "gpu": "0", "UUID": "GPU-a",
              "values": [[1, "30000"], [2, "30001"]]}  # fmt: skip
    xid = {"metric": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "UUID": "GPU-a", "values": [[2, "79"]]}
    text = _stored(
        _util([[1, "0"], [2, "0"]]), memory, xid,
        _util([[1, "NaN"]], gpu="1", uuid="GPU-b"),  # nothing readable: no GPU 1
        {"metric": ["DCGM_FI_DEV_GPU_UTIL"], "values": [[1, "5"]]},  # a list for a name
        {"metric": "DCGM_FI_DEV_GPU_UTIL", "gpu": "2", "values": {"1": "5"}},  # not a matrix
        {"metric": "DCGM_FI_DEV_SM_CLOCK", "gpu": "3", "values": [[1, "5"]]},  # not read
    )  # fmt: skip
    (series,) = gpushape.parse_dcgm("n0", text)
    assert (series.index, series.uuid, series.xid) == (0, "GPU-a", 79)
    assert [(p.util, p.memory_mib) for p in series.points] == [(0, 30000), (0, 30001)]
    assert series.reading == "idle"


def test_a_long_series_keeps_its_last_points_and_damaged_text_reads_as_nothing():
    points = [[t, "100"] for t in range(gpushape.MAX_POINTS + 50)]
    (series,) = gpushape.parse_dcgm("n0", _stored(_util(points)))
    assert len(series.points) == gpushape.MAX_POINTS  # the first MAX_POINTS read, as stored
    for text in ("", "{", "[]", '{"series": {}}', '{"series": [1, "x", null]}'):
        assert gpushape.parse_dcgm("n0", text) == []


def test_the_parse_kept_as_json_reads_back_equal_and_a_form_it_could_not_be_is_refused():
    memory = {"metric": "DCGM_FI_DEV_FB_USED", "gpu": "1", "UUID": "GPU-b",
              "values": [[1, "30000"], [2, "30001"]]}  # fmt: skip
    power = {"metric": "DCGM_FI_DEV_POWER_USAGE", "gpu": "1", "UUID": "GPU-b",
             "values": [[1, "310.25"], [2, "90"]]}  # fmt: skip
    xid = {"metric": "DCGM_FI_DEV_XID_ERRORS", "gpu": "1", "UUID": "GPU-b", "values": [[2, "79"]]}
    text = _stored(_util([[1, "100"], [2, "0"]]), _util([[1, "0"], [2, "0"]], "1", "GPU-b"),
                   memory, power, xid, _util([[10**400, "5"], [3, "5"]], "", ""))  # fmt: skip
    parsed = gpushape.parse_dcgm("n0", text)
    assert gpushape.dcgm_series("n0", json.loads(text)) == parsed  # the store's own: no text
    kept = json.loads(json.dumps(gpushape.dcgm_encoded(parsed)))
    assert gpushape.dcgm_decoded("n0", kept) == parsed
    assert [s.xid for s in parsed] == [None, 79, None] and parsed[1].reading == "idle"

    def refused(data) -> None:
        with pytest.raises(codec.CodecError):
            gpushape.dcgm_decoded("n0", data)

    refused([len(parsed), "not a column"])
    refused({"series": kept})
    for field, value in (("node", "n1"), ("source", "nvidia-smi"), ("points", [])):
        refused(gpushape.dcgm_encoded([parsed[0], replace(parsed[1], **{field: value})]))
    (full,) = gpushape.parse_dcgm("n0", _stored(_util([[t, "1"] for t in range(720)])))
    grown = replace(full, points=full.points + full.points[:1])  # one point past the bound
    refused(gpushape.dcgm_encoded([grown]))
    (one,) = gpushape.parse_dcgm("n0", _stored(_util([[1, "1"]])))
    refused(gpushape.dcgm_encoded([one] * (gpushape.MAX_DCGM_ITEMS + 1)))
