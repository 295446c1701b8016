"""A bundle that holds only flight-recorder dumps gets a verdict, not "unknown".

The dumps are real gloo dumps written by torch 2.13 (the lab's and tests/analysis/samples'),
laid out as a bundle (docs/bundle-format.md: `<node>/flight_recorder/<name>`, a manifest with
the world size) and read by the bundle reader, `hangdesk diagnose` and `manage.py diagnose
--bundle`, as an SRE who was handed a folder of dumps would. Nothing else is in the bundle: no
ps, no stacks, no logs. No database is used.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from analysis import diagnose
from hangdesk import cli
from hangdesk.bundles import read_bundle
from tests.analysis.flight_recorder.scenarios import LAB_DUMPS, SAMPLES

# (dumps, classification, suspects): the lab's own expectation (docs/lab.md) for its scenarios.
CASES = [
    (LAB_DUMPS / "rank-exit", "A", [3]),
    (LAB_DUMPS / "tp-rank-exit", "A", [3]),
    (LAB_DUMPS / "dataloader-stall", "A", [1]),
    (LAB_DUMPS / "collective-mismatch", "B", [3]),
    (LAB_DUMPS / "env-drift", "C", []),
    (SAMPLES / "tp-rank-stall" / "fr", "A", [3]),
    (SAMPLES / "tp-mismatch" / "fr", "B", [3]),
    (SAMPLES / "outside" / "fr", "A", [3]),
]


def _bundle(dumps: Path, root: Path, world: int | None = 4) -> Path:
    """Ranks 0-1 on node gpu-0, 2-3 on gpu-1, as a 2 x 2 job's dumps would be gathered."""
    root.mkdir()
    manifest = {"format": 1, "collected_at": "2026-12-01T20:00:00+00:00"}
    if world:
        manifest["world_size"] = world
    (root / "manifest.json").write_text(json.dumps(manifest))
    for path in sorted(dumps.glob("trace_rank_*")):
        if path.suffix:
            continue
        rank = int(path.name.rsplit("_", 1)[1])
        folder = root / f"gpu-{rank // 2}" / "flight_recorder"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / path.name)
    return root


@pytest.mark.parametrize("dumps,classification,suspects", CASES, ids=lambda v: str(v)[-30:])
def test_a_bundle_of_dumps_alone_is_classified(dumps, classification, suspects, tmp_path):
    result = diagnose(read_bundle(_bundle(dumps, tmp_path / "bundle"))).to_json()
    assert (result["classification"], result["suspect_ranks"]) == (classification, suspects), (
        result["summary"]
    )
    assert result["flight_recorder"]["dump_count"] >= 3
    # Every suspect is named by a line of the flight recorder's evidence.
    cited = {e["rank"] for e in result["evidence"] if e["kind"] == "flight_recorder"}
    assert set(suspects) <= cited


def test_the_rank_that_left_no_dump_is_named_with_the_line_that_says_so(tmp_path):
    result = diagnose(read_bundle(_bundle(LAB_DUMPS / "tp-rank-exit", tmp_path / "b"))).to_json()
    lines = [e["text"] for e in result["evidence"] if e["rank"] == 3]
    assert any("no flight-recorder dump" in line for line in lines), lines
    first = result["flight_recorder"]["first_mismatch"]
    assert first["without_dump"] == [3] and first["culprits"] == [3]
    # Rank 2 waits for it in their tensor-parallel group; ranks 0-1 in data-parallel groups.
    assert set(first["victims"]) <= {0, 1, 2} and 3 not in first["victims"]


def test_without_a_world_size_a_gloo_bundle_still_names_the_rank_a_group_lacks(tmp_path):
    # gloo's pg_config lists the whole world when the job has one group: rank 3 is missing.
    result = diagnose(
        read_bundle(_bundle(LAB_DUMPS / "rank-exit", tmp_path / "b", world=None))
    ).to_json()
    assert (result["classification"], result["suspect_ranks"]) == ("A", [3])


def test_diagnose_bundle_prints_the_verdict_of_dumps_alone(tmp_path, capsys):
    bundle = _bundle(LAB_DUMPS / "collective-mismatch", tmp_path / "bundle")
    call_command("diagnose", "--bundle", str(bundle), "--json")
    result = json.loads(capsys.readouterr().out)
    assert result["classification"] == "B" and result["suspect_ranks"] == [3]
    assert "gloo:barrier" in result["summary"]


def test_the_command_line_says_stuck_on_a_folder_of_dumps(tmp_path, capsys):
    bundle = _bundle(LAB_DUMPS / "rank-exit", tmp_path / "bundle")
    status = cli.main(["diagnose", str(bundle), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert (result["classification"], result["suspect_ranks"]) == ("A", [3])
    assert status == 1  # stuck
