"""The per-rank table masked by its rows' shape (hangdesk/masking/evidence.py,
`masked_rank_rows`): what the console makes itself is kept, what came from evidence is
masked, and a row that is not of that shape is masked whole: no secret gets through either
way, and the result is the generic masking's."""

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

import analysis
from analysis.records import RankRow, RankStatus
from collectors.bundles import read_bundle
from hangdesk.masking import mask_json, masked_diagnosis
from hangdesk.masking.evidence import masked_rank_rows

HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
CORPUS = Path(__file__).parents[1] / "analysis" / "corpus"


def _row(**fields) -> dict:
    base = RankRow(
        rank=3, status=RankStatus.IN_COLLECTIVE, node="node-1", pid=4242, state="S",
        local_rank=3, last_step=12, last_step_at=datetime(2026, 11, 29, 9, 23, 21, 39, UTC),
        step_time=0.21, frame="all_reduce (torch/distributed/distributed_c10d.py:3252)",
        stack_signature="3c4350211021", stack_group=0,
    )  # fmt: skip
    return {**base.to_json(), **fields}


@pytest.mark.parametrize("field", ["node", "frame", "state"])
def test_a_secret_in_a_field_read_from_evidence_is_masked(field):
    shown = masked_rank_rows([_row(**{field: f"x --token={HF} y"})])
    assert HF not in str(shown)
    assert "[REDACTED:" in shown[0][field]


@pytest.mark.parametrize(
    "field", ["pid", "rank", "step_time", "status", "last_step_at", "stack_signature"]
)
def test_a_secret_where_the_console_writes_a_number_or_a_known_value_is_masked(field):
    # Not what RankRow.to_json makes: the row is not of its shape and is masked whole.
    shown = masked_rank_rows([_row(**{field: HF})])
    assert HF not in str(shown)
    assert shown == mask_json([_row(**{field: HF})])


def test_a_row_with_a_field_the_shape_does_not_know_is_masked_whole():
    rows = [_row(command=f"python train.py --hf_token {HF}"), _row(note={"text": HF})]
    shown = masked_rank_rows(rows)
    assert HF not in str(shown)
    assert shown == mask_json(rows)


def test_what_the_console_makes_is_kept_as_it_is():
    row = _row(exit_code=139, gpu_util=97, suspect=True, last_step_at=None)
    assert masked_rank_rows([row]) == [row]


def test_a_secret_per_rank_is_masked_in_every_row_with_one_mask_per_value():
    rows = [_row(rank=r, node=f"{HF}-{r % 2}") for r in range(6)]
    shown = masked_rank_rows(rows)
    assert HF not in str(shown)
    assert len({row["node"] for row in shown}) == 2  # still told apart


@pytest.mark.parametrize("case", sorted(p.name for p in CORPUS.iterdir() if p.is_dir()))
def test_a_diagnosis_is_masked_as_the_generic_masking_masks_it(case):
    diagnosis = analysis.diagnose(read_bundle(CORPUS / case))
    planted = dataclasses.replace(
        diagnosis,
        per_rank=tuple(
            dataclasses.replace(row, frame=f"{row.frame} --password={HF}")
            for row in diagnosis.per_rank
        ),
    )
    for one in (diagnosis, planted):
        assert masked_diagnosis(one) == mask_json(one.to_json())
    assert HF not in str(masked_diagnosis(planted))


@pytest.mark.parametrize(
    "odd",
    [
        {"frame": f"x --token={HF} y"},  # made here, a secret read from evidence
        {"node": None, "last_step_at": None},  # made here, nothing to mask
        {"node": ["a", HF]},  # made here, a text of another type
        {"status": HF},  # not made here: masked whole
        {"last_step_at": HF},
        {"stack_signature": f"--token {HF}"},
        {"pid": HF},
    ],
)
def test_one_odd_row_among_many_is_masked_as_the_generic_masking_masks_it(odd):
    # The table's rows are checked a column at a time: one row unlike the others is found.
    rows = [_row(rank=r, node=f"node-{r // 8}") for r in range(64)]
    rows[37] = {**rows[37], **odd}
    shown = masked_rank_rows(rows)
    assert HF not in str(shown)
    assert shown == mask_json(rows)
    assert shown[36] == rows[36] and shown[36] is not rows[36]
