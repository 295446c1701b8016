"""Every scenario of PyTorch's own analyzer tests (test/distributed/flight_recorder/
test_fr_analysis.py in pytorch/pytorch), each as one dump per rank: the pairs of
FlightRecorderEventTest.test_match_one_event, each collective of test_all_events, the backends
of FlightRecorderOpBackendTest, the six cases of FlightRecorderE2ETest.testBuildDB. Two things
change on the way, both toward what torch writes: dtypes are lists of torch's names
(['Float'], not the string "float32"), and sequence ids are numbers that grow (the test's
helper leaves every entry at collective_seq_id "0"; torch counts)."""

from __future__ import annotations

from tests.analysis.flight_recorder.scenario import MATCHED, Expect, Scenario
from tests.analysis.flight_recorder.torch_format import Op, Rank


def _pair(name, story, a: Op, b: Op, expect: Expect, note: str = "") -> Scenario:
    """Rank 0 ran `a`, rank 1 ran `b`: one of test_match_one_event's pairs."""
    return Scenario(
        name, "pytorch", story, expect, (Rank(0, [a]), Rank(1, [b])), note=note
    )  # fmt: skip


def _op(name, inputs=((4, 4),), outputs=None, state="scheduled", seq=1, **kw) -> Op:
    return Op(name, seq, inputs, outputs, state, desc="default", **kw)


def _match_one_event() -> list[Scenario]:
    e1 = _op("all_reduce")
    return [
        _pair("pt-event-same", "e1 vs e1: the same all_reduce", e1, e1, MATCHED),
        _pair(
            "pt-event-type",
            "e1 vs e2: all_reduce against all_gather",
            e1,
            _op("all_gather"),
            Expect("collective", (("0", 1),)),
        ),
        _pair(
            "pt-event-all-to-all",
            "e3 vs e4: the same all_to_all",
            _op("all_to_all"),
            _op("all_to_all"),
            MATCHED,
        ),
        _pair(
            "pt-event-input-size",
            "e1 vs e5: rank 1's all_reduce reads [5, 4] into [4, 4]",
            e1,
            _op("all_reduce", ((5, 4),), ((4, 4),)),
            Expect("sizes", (("0", 1),), (1,)),
        ),
        _pair(
            "pt-event-output-size",
            "e1 vs e6: rank 1's all_reduce writes [4, 4] into [5, 4]",
            e1,
            _op("all_reduce", ((4, 4),), ((5, 4),)),
            Expect("sizes", (("0", 1),), (1,)),
        ),
        _pair(
            "pt-event-self-size",
            "e7 vs e7: both ranks' all_reduce reads [4, 4] into [5, 4]",
            _op("all_reduce", ((4, 4),), ((5, 4),), seq=2),
            _op("all_reduce", ((4, 4),), ((5, 4),), seq=2),
            Expect("sizes", (("0", 2),)),
        ),
        _pair(
            "pt-event-state",
            "e1 vs e9: rank 1 completed the all_reduce rank 0 has only scheduled",
            e1,
            _op("all_reduce", state="completed"),
            Expect("state", (("0", 1),), (0,)),
        ),
        _pair(
            "pt-event-dtype",
            "e10 vs e9: rank 0's all_reduce turns Float into Half",
            _op("all_reduce", state="completed", dtype=("Float", "Half")),
            _op("all_reduce", state="completed"),
            Expect("dtypes", (("0", 1),), (0,)),
        ),
        _pair(
            "pt-event-gather-root-empty",
            "e11 vs e12: gather's root receives two tensors, the other rank nothing",
            _op("gather", outputs=((4, 4), (4, 4)), state="completed"),
            _op("gather", outputs=((),), state="completed", dtype=("Float", ())),
            MATCHED,
        ),
        _pair(
            "pt-event-gather-root",
            "e11 vs e13: gather's root receives two tensors, the other rank's output is [4, 4]",
            _op("gather", outputs=((4, 4), (4, 4)), state="completed"),
            _op("gather", state="completed", dtype=("Float", ())),
            MATCHED,
        ),
    ]


# torch 2.13's COLLECTIVES (flight_recorder/components/types.py), as test_all_events walks them.
ALL_EVENTS = (
    *("ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced", "_all_gather_base", "_broadcast_oop"),
    *("_reduce_oop", "_reduce_scatter_base", "all_gather", "all_gather_into_tensor_coalesced"),
    *("all_gather_single", "all_gather_v", "all_reduce", "all_reduce_barrier", "all_to_all"),
    *("all_to_all_single", "all_to_all_v_single", "allreduce_coalesced", "barrier", "broadcast"),
    *("gather", "new_window", "reduce", "reduce_scatter", "reduce_scatter_single"),
    *("reduce_scatter_tensor_coalesced", "reduce_scatter_v", "scatter", "split"),
)


def _all_events() -> list[Scenario]:
    out = []
    for name in ALL_EVENTS:
        inputs, outputs = ((4, 4),), ((4, 4),)
        if name in ("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"):
            outputs = ((8,),)
        if name in ("all_gather", "_all_gather_base", "all_gather_into_tensor_coalesced"):
            outputs = ((32,),)
        op = _op(name, inputs, outputs)
        story = f"both ranks ran the same {name}"
        out.append(_pair(f"pt-all-{name.strip('_').replace('_', '-')}", story, op, op, MATCHED))
    return out


def _backends() -> list[Scenario]:
    out = []
    for backend in ("nccl", "ncclx", "gloo", "xccl", "mybackend"):
        op = Op("all_reduce", 1, desc="default")
        ranks = (Rank(0, [op], backend=backend), Rank(1, [op], backend=backend))
        story = f"a completed all_reduce recorded by a {backend} process group"
        note = (
            "PyTorch's test asserts that it refuses this backend" if backend == "mybackend" else ""
        )
        out.append(Scenario(f"pt-backend-{backend}", "pytorch", story, MATCHED, ranks, note=note))
    return out


def _build_db() -> list[Scenario]:
    sub = {"1": ("sub_pg", [0])}, {"1": ("sub_pg", [1])}

    def both(name, story, ops0, ops1, expect, groups=({}, {}), note=""):
        ranks = (Rank(0, ops0, dict(groups[0])), Rank(1, ops1, dict(groups[1])))
        return Scenario(name, "pytorch", story, expect, ranks, note=note)

    def c(name, seq, inputs=((4, 4),), **kw):
        return Op(name, seq, inputs, **{"desc": "default", **kw})

    marker = ((),)
    return [
        both(
            "pt-db-all-reduce-and-split-group",
            "case 1: an all_reduce of the default group, then one of group '1', which is a "
            "different group on each rank (split_group: members [0] and [1])",
            [c("all_reduce", 1), c("all_reduce", 1, ((5, 5),), pg="1", desc="sub_pg")],
            [c("all_reduce", 1), c("all_reduce", 1, ((5, 5),), pg="1", desc="sub_pg")],
            MATCHED,
            sub,
        ),
        both(
            "pt-db-allreduce-coalesced",
            "case 2: an allreduce_coalesced on both ranks",
            [c("allreduce_coalesced", 1)],
            [c("allreduce_coalesced", 1)],
            MATCHED,
        ),
        both(
            "pt-db-coalesced-broadcasts",
            "case 3: two broadcasts coalesced (one sequence id) on both ranks",
            [c("broadcast", 1), c("broadcast", 1), c("coalesced", 1, marker)],
            [c("broadcast", 1), c("broadcast", 1), c("coalesced", 1, marker)],
            MATCHED,
        ),
        both(
            "pt-db-coalesced-broadcast-sizes",
            "case 4: in a coalesced group of two _broadcast_oop, rank 0's second is [5, 5] and "
            "rank 1's [4, 4]",
            [
                c("_broadcast_oop", 1),
                c("_broadcast_oop", 1, ((5, 5),)),
                c("ALLGATHER_coalesced", 1, marker),
            ],
            [c("_broadcast_oop", 1), c("_broadcast_oop", 1), c("ALLGATHER_coalesced", 1, marker)],
            Expect("sizes", (("0", 1),)),
        ),
        both(
            "pt-db-coalesced-reduces",
            "case 5: two _reduce_oop coalesced on both ranks",
            [c("_reduce_oop", 1), c("_reduce_oop", 1), c("REDUCE_SCATTER_coalesced", 1, marker)],
            [c("_reduce_oop", 1), c("_reduce_oop", 1), c("REDUCE_SCATTER_coalesced", 1, marker)],
            MATCHED,
        ),
        both(
            "pt-db-coalesced-on-one-rank",
            "case 6: after an all_reduce both ran, rank 1 ran a coalesced group of two "
            "_reduce_oop that rank 0 never issued",
            [c("all_reduce", 1)],
            [
                c("all_reduce", 1),
                c("_reduce_oop", 2),
                c("_reduce_oop", 2),
                c("REDUCE_SCATTER_coalesced", 2, marker),
            ],
            Expect("missing", (("0", 2),), (0,)),
            note="the coalesced group is at sequence id 2 (the test leaves it at 0)",
        ),
    ]


def pytorch_scenarios() -> list[Scenario]:
    return _match_one_event() + _all_events() + _backends() + _build_db()
