"""The flight-recorder scenarios hangdesk and PyTorch's analyzer are read side by side on.

Three sources:
- `pytorch`: every scenario of PyTorch's own analyzer tests
  (test/distributed/flight_recorder/test_fr_analysis.py in pytorch/pytorch: the pairs of
  FlightRecorderEventTest.test_match_one_event, each collective of test_all_events, the backends
  of FlightRecorderOpBackendTest, the six cases of FlightRecorderE2ETest.testBuildDB), each turned
  into one dump per rank. Two things change on the way, both toward what torch writes: dtypes
  are lists of torch's names (['Float'], not the string "float32"), and sequence ids are numbers
  that grow (the test's helper leaves every entry at collective_seq_id "0"; torch counts).
- `issue`: the cases issue 17 lists beyond them (dtypes, state, coalesced groups, ranks without
  a dump, send/recv, sequence ties across groups, rooted and uneven collectives, orders).
- `lab`: real gloo dumps written by torch 2.13 itself, from the lab and from
  tests/analysis/samples.

Each scenario states the answer the evidence supports (`Expect`), written from what the ranks
did, not from either tool's output: the class of the first stop, where it is, and its culprits
(None where the evidence cannot single a rank out: equal sides, every rank alike).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.analysis.flight_recorder.torch_format import Op, Rank

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "samples"
LAB_DUMPS = HERE / "lab_dumps"

# hangdesk's stop kinds -> the classes the answers are compared in (PyTorch's MatchState maps
# to the same classes in pytorch_side.py).
KIND_CLASS = {
    "different_collective": "collective",
    "different_sizes": "sizes",
    "invalid_sizes": "sizes",
    "different_dtypes": "dtypes",
    "invalid_dtypes": "dtypes",
    "not_completed": "state",
    "not_started": "state",
    "missing_ranks": "missing",
    "unmatched_p2p": "missing",
    "different_order": "order",
}


@dataclass(frozen=True)
class Expect:
    kind: str | None  # None: every collective met; else a class of KIND_CLASS
    at: tuple[tuple[str, int], ...] = ()  # (group name, sequence id): where it may be reported
    culprits: tuple[int, ...] | None = None  # None: no rank can be singled out

    def text(self) -> str:
        if self.kind is None:
            return "all met"
        where = " or ".join(f"{pg} #{seq}" for pg, seq in self.at)
        who = "no single rank" if self.culprits is None else _ranks(self.culprits)
        return f"{self.kind} at {where}; {who}"


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str  # "pytorch" | "issue" | "lab"
    story: str
    expect: Expect
    ranks: tuple[Rank, ...] = ()
    world: int = 2
    captured: Path | None = None  # real dumps: every trace_rank_N file in this directory
    as_json: bool = False  # use the captured .json dumps instead of the pickles
    note: str = ""  # what changed from the source


def _ranks(ranks) -> str:
    ranks = list(ranks)
    return "rank " + str(ranks[0]) if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


MATCHED = Expect(None)


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


# ------------------------------------------------------------------ issue 17's cases


def _steps(ranks, done: int, **kw) -> list[Op]:
    """`done` completed all_reduces of the default group, as a job's first steps."""
    return [Op("all_reduce", seq, ((1024,),), **kw) for seq in range(1, done + 1)]


def _world(n: int, make) -> tuple[Rank, ...]:
    return tuple(Rank(r, make(r)) for r in range(n))


def _issue_basics() -> list[Scenario]:
    def pending(r, **kw):
        return [*_steps(r, 4), Op("all_reduce", 5, ((1024,),), state="started", **kw)]

    return [
        Scenario(
            "dtype-differs",
            "issue",
            "4 ranks all_reduce 1024 elements at #5; rank 2 in BFloat16, the others in Float",
            Expect("dtypes", (("0", 5),), (2,)),
            _world(4, lambda r: pending(r, dtype="BFloat16" if r == 2 else "Float")),
            world=4,
        ),
        Scenario(
            "state-not-started",
            "issue",
            "4 ranks issued all_reduce #5; the kernel started on ranks 0, 1, 3 and never on 2 "
            "(its GPU is still busy with earlier work)",
            Expect("state", (("0", 5),), (2,)),
            _world(
                4,
                lambda r: [
                    *_steps(r, 4),
                    Op("all_reduce", 5, ((1024,),), state="scheduled" if r == 2 else "started"),
                ],
            ),
            world=4,
        ),
        Scenario(
            "all-reduce-input-output",
            "issue",
            "rank 1's all_reduce #5 reads 1024 elements into 512",
            Expect("sizes", (("0", 5),), (1,)),
            _world(
                4,
                lambda r: [
                    *_steps(r, 4),
                    Op("all_reduce", 5, ((1024,),), ((512,),) if r == 1 else None, state="started"),
                ],
            ),
            world=4,
        ),
        Scenario(
            "all-gather-list",
            "issue",
            "2 ranks all_gather into a list of 2 tensors (torch records each output tensor)",
            MATCHED,
            _world(2, lambda r: [Op("all_gather", 1, ((4, 4),), ((4, 4), (4, 4)))]),
        ),
        Scenario(
            "all-gather-short-output",
            "issue",
            "rank 3's all_gather_into_tensor #3 gathers into 2048 elements; 4 x 1024 are sent",
            Expect("sizes", (("0", 3),), (3,)),
            _world(
                4,
                lambda r: [
                    *_steps(r, 2),
                    Op(
                        "_all_gather_base",
                        3,
                        ((1024,),),
                        ((2048,),) if r == 3 else ((4096,),),
                        state="started",
                    ),
                ],
            ),
            world=4,
        ),
    ]


def _coalesced(r: int, odd: int | None, sizes=(512, 256, 128), short: int | None = None):
    ops = [*_steps(r, 2)]
    mine = list(sizes if short != r else sizes[:-1])
    for i, size in enumerate(mine):
        size = size * 2 if (odd == r and i == 1) else size
        ops.append(Op("all_reduce", 3, ((size,),), state="started"))
    ops.append(Op("coalesced", 3, ((),), state="started"))
    return ops


def _issue_coalesced() -> list[Scenario]:
    return [
        Scenario(
            "coalesced-inner-op",
            "issue",
            "a coalesced group of three all_reduces at #3; rank 3's second is twice the size",
            Expect("sizes", (("0", 3),), (3,)),
            _world(4, lambda r: _coalesced(r, odd=3)),
            world=4,
        ),
        Scenario(
            "coalesced-shorter",
            "issue",
            "a coalesced group of three all_reduces at #3; rank 1 coalesced only two",
            Expect("collective", (("0", 3),), (1,)),
            _world(4, lambda r: _coalesced(r, odd=None, short=1)),
            world=4,
        ),
        Scenario(
            "coalesced-matched",
            "issue",
            "a coalesced group of three all_reduces at #3, the same on every rank",
            MATCHED,
            _world(4, lambda r: [op for op in _coalesced(r, odd=None) if op.seq < 3]),
            world=4,
        ),
    ]


def _issue_missing() -> list[Scenario]:
    def stuck(r):
        return [*_steps(r, 5), Op("all_reduce", 6, ((1024,),), state="started")]

    return [
        Scenario(
            "rank-without-dump",
            "issue",
            "4 ranks; ranks 0-2 wait in all_reduce #6; rank 3 left no dump (it died)",
            Expect("missing", (("0", 6),), (3,)),
            tuple(Rank(r, stuck(r)) for r in range(3)),
            world=4,
        ),
        Scenario(
            "rank-without-dump-all-done",
            "issue",
            "4 ranks; ranks 0-2 completed every collective (rank 3 took part in all of them) "
            "and rank 3's dump is missing: nothing points at it",
            MATCHED,
            tuple(Rank(r, _steps(r, 6)) for r in range(3)),
            world=4,
        ),
        Scenario(
            "rank-never-issued",
            "issue",
            "4 ranks; rank 1 completed #1-5 and never issued #6, which ranks 0, 2, 3 wait in",
            Expect("missing", (("0", 6),), (1,)),
            _world(4, lambda r: _steps(r, 5) if r == 1 else stuck(r)),
            world=4,
        ),
        Scenario(
            "ring-buffer-wrapped",
            "issue",
            "rank 2's ring buffer dropped #1-#3 (it kept #4 on); at #6 rank 1 runs a broadcast "
            "where the others all_reduce",
            Expect("collective", (("0", 6),), (1,)),
            tuple(
                Rank(
                    r,
                    [op for op in _steps(r, 5) if r != 2 or op.seq >= 4]
                    + [Op("broadcast" if r == 1 else "all_reduce", 6, ((1024,),), state="started")],
                    first_record_id=3 if r == 2 else 0,
                )
                for r in range(4)
            ),
            world=4,
        ),
    ]


def _p2p(name: str, seq: int, state: str = "completed", size: int = 64) -> Op:
    return Op(name, seq, ((size,),), state=state)


def _issue_p2p() -> list[Scenario]:
    sent = [_p2p("send 0->1", s) for s in (1, 2, 3)]
    received = [_p2p("recv 1<-0", s) for s in (1, 2, 3)]
    return [
        Scenario(
            "p2p-sender-never-sent",
            "issue",
            "pipeline of 2 stages: rank 1 waits in its 4th recv from rank 0; rank 0 sent 3 "
            "and is busy elsewhere (no op pending)",
            Expect("missing", (("0", 4),), (0,)),
            (Rank(0, sent), Rank(1, [*received, _p2p("recv 1<-0", 4, "started")])),
        ),
        Scenario(
            "p2p-receiver-never-received",
            "issue",
            "pipeline of 2 stages: rank 0 waits in its 4th send to rank 1; rank 1 received 3 "
            "and never posted the 4th recv",
            Expect("missing", (("0", 4),), (1,)),
            (Rank(0, [*sent, _p2p("send 0->1", 4, "started")]), Rank(1, received)),
        ),
        Scenario(
            "p2p-sizes",
            "issue",
            "rank 0 sends 64 elements into rank 1's recv of 128; both wait",
            Expect("sizes", (("0", 4),)),
            (
                Rank(0, [*sent, _p2p("send 0->1", 4, "started")]),
                Rank(1, [*received, _p2p("recv 1<-0", 4, "started", size=128)]),
            ),
        ),
        Scenario(
            "p2p-pipeline-matched",
            "issue",
            "3 pipeline stages: every send has its recv, all completed",
            MATCHED,
            (
                Rank(0, [_p2p("send 0->1", 1), _p2p("recv 0<-1", 2)]),
                Rank(
                    1,
                    [
                        _p2p("recv 1<-0", 1),
                        _p2p("send 1->2", 2),
                        _p2p("recv 1<-2", 3),
                        _p2p("send 1->0", 4),
                    ],
                ),
                Rank(2, [_p2p("recv 2<-1", 1), _p2p("send 2->1", 2)]),
            ),
            world=3,
        ),
        Scenario(
            "p2p-victim-chain",
            "issue",
            "3 pipeline stages: rank 2 waits for rank 1's 2nd send, which rank 1 cannot post: it "
            "waits in its 2nd recv from rank 0, which never sent it (no op pending)",
            Expect("missing", (("0", 3),), (0,)),
            (
                Rank(0, [_p2p("send 0->1", 1)]),
                Rank(
                    1, [_p2p("recv 1<-0", 1), _p2p("send 1->2", 2), _p2p("recv 1<-0", 3, "started")]
                ),
                Rank(2, [_p2p("recv 2<-1", 1), _p2p("recv 2<-1", 2, "started")]),
            ),
            world=3,
        ),
    ]


def _dp_tp(stalled: int, pending_group: dict[int, str]) -> tuple[Rank, ...]:
    """4 ranks, data parallel [0, 2] [1, 3] (groups 1, 2), tensor parallel [0, 1] [2, 3]
    (groups 3, 4); each step a tp then a dp all_reduce. At step 6 `stalled` never issues its
    tp all_reduce; the others wait in the group `pending_group` names."""
    dp = {0: "1", 2: "1", 1: "2", 3: "2"}
    tp = {0: "3", 1: "3", 2: "4", 3: "4"}
    members = {"1": [0, 2], "2": [1, 3], "3": [0, 1], "4": [2, 3]}
    ranks = []
    for r in range(4):
        ops = []
        for step in range(1, 7):
            if step == 6 and r == stalled:
                break
            tp_state = "completed" if step < 6 or pending_group.get(r) != tp[r] else "started"
            ops.append(Op("all_reduce", step, ((256,),), state=tp_state, pg=tp[r], desc="TP"))
            if step == 6 and pending_group.get(r) == tp[r]:
                break
            dp_state = "completed" if step < 6 else "started"
            ops.append(Op("all_reduce", step, ((1024,),), state=dp_state, pg=dp[r], desc="DP"))
        groups = {g: ("DP" if g in "12" else "TP", members[g]) for g in (dp[r], tp[r])}
        ranks.append(Rank(r, ops, groups))
    return tuple(ranks)


def _issue_groups() -> list[Scenario]:
    two_orders = []
    for r in range(2):
        ops = [Op("all_reduce", s, pg=g, desc="sub") for s in (1, 2) for g in ("5", "6")]
        first = "5" if r == 0 else "6"
        ops += [Op("all_reduce", 3, pg=first, desc="sub", state="started")]
        two_orders.append(Rank(r, ops, {"5": ("sub", [0, 1]), "6": ("sub", [0, 1])}))
    majority = []
    for r in range(4):
        ops = [Op("all_reduce", s, pg=g, desc="sub") for s in (1, 2) for g in ("5", "6")]
        ops += [Op("all_reduce", 3, pg="6" if r == 3 else "5", desc="sub", state="started")]
        majority.append(Rank(r, ops, {"5": ("sub", [0, 1, 2, 3]), "6": ("sub", [0, 1, 2, 3])}))
    split = []
    for r in range(4):
        members = [0, 1] if r < 2 else [2, 3]
        ops = [Op("all_reduce", 1, pg="5", desc="split")]
        if r != 3:
            ops.append(Op("all_reduce", 2, pg="5", desc="split", state="started"))
        split.append(Rank(r, ops, {"5": ("split", members)}))
    return [
        Scenario(
            "sequence-tie-across-groups",
            "issue",
            "dp x tp on 4 ranks: rank 3 never issues its tp all_reduce #6 (group 4); rank 2 "
            "waits for it there; ranks 0-1 wait in dp #6 (groups 1, 2). Group 1 (the lowest "
            "name) stops too, but rank 2 is absent from it because it waits in group 4",
            Expect("missing", (("4", 6), ("2", 6)), (3,)),
            _dp_tp(3, {0: "1", 1: "2", 2: "4"}),
            world=4,
        ),
        Scenario(
            "different-order-two-ranks",
            "issue",
            "ranks 0 and 1 share groups 5 and 6; rank 0 issued group 5's #3, rank 1 group 6's "
            "#3 first: each waits for the other",
            Expect("order", (("5", 3), ("6", 3))),
            tuple(two_orders),
        ),
        Scenario(
            "different-order-majority",
            "issue",
            "4 ranks share groups 5 and 6; ranks 0-2 issued group 5's #3, rank 3 group 6's #3",
            Expect("order", (("5", 3), ("6", 3)), (3,)),
            tuple(majority),
            world=4,
        ),
        Scenario(
            "split-group-same-name",
            "issue",
            "group '5' is [0, 1] on ranks 0-1 and [2, 3] on ranks 2-3 (split_group); in the "
            "second, rank 3 never issued #2",
            Expect("missing", (("5", 2),), (3,)),
            tuple(split),
            world=4,
        ),
    ]


def _rooted_and_uneven() -> list[Scenario]:
    def gather(r):
        outputs = ((4,), (4,), (4,), (4,)) if r == 0 else ()
        return [Op("gather", 1, ((4,),), outputs, dtype=("Float", "Float" if r == 0 else ()))]

    def scatter(r):
        inputs = ((4,), (4,), (4,), (4,)) if r == 0 else ()
        return [Op("scatter", 1, inputs, ((4,),), dtype=("Float" if r == 0 else (), "Float"))]

    sends = {0: 8, 1: 4, 2: 6, 3: 2}
    receives = {0: 5, 1: 5, 2: 5, 3: 5}
    return [
        Scenario("gather-root", "issue", "4 ranks gather to rank 0", MATCHED, _world(4, gather), 4),
        Scenario(
            "scatter-root", "issue", "rank 0 scatters to 4 ranks", MATCHED, _world(4, scatter), 4
        ),
        Scenario(
            "all-to-all-uneven",
            "issue",
            "an uneven all_to_all_single: the ranks send 8, 4, 6, 2 and receive 5 each",
            MATCHED,
            _world(4, lambda r: [Op("all_to_all", 1, ((sends[r],),), ((receives[r],),))]),
            4,
        ),
        Scenario(
            "all-to-all-unbalanced",
            "issue",
            "an all_to_all whose ranks send 20 elements in all and expect 24",
            Expect("sizes", (("0", 1),)),
            _world(4, lambda r: [Op("all_to_all", 1, ((5,),), ((6,),), state="started")]),
            4,
        ),
    ]


def issue_scenarios() -> list[Scenario]:
    return (
        _issue_basics()
        + _issue_coalesced()
        + _issue_missing()
        + _issue_p2p()
        + _issue_groups()
        + _rooted_and_uneven()
    )


# ------------------------------------------------------------------ real gloo dumps


def _sample(name: str, story: str, expect: Expect, as_json: bool = False) -> Scenario:
    suffix = "-json" if as_json else ""
    return Scenario(
        f"gloo-{name}{suffix}",
        "lab",
        story,
        expect,
        world=4,
        captured=SAMPLES / name / "fr",
        as_json=as_json,
    )


# The lab's stuck group and sequence id, as its expectation names them (docs/lab.md).
def _lab(name: str) -> Scenario:
    meta = json.loads((LAB_DUMPS / name / "expected.json").read_text())["expected"]
    kind = {"rank-exit": "missing", "collective-mismatch": "collective",
            "dataloader-stall": "missing", "env-drift": None,
            "tp-rank-exit": "missing"}[name]  # fmt: skip
    culprits = tuple(meta.get("suspect_ranks") or ()) or None
    stuck = meta.get("stuck_group") or {}
    # The lab's step N is seq N of a tp/dp group, and seq N + 1 of the default group (its
    # first collective is the start-up barrier).
    seq = stuck["seq"] if stuck else meta["fault_step"] + 1
    at = tuple((group, seq) for group in _lab_groups(name)) if kind else ()
    return Scenario(
        f"lab-{name}",
        "lab",
        meta["summary"],
        Expect(kind, at, culprits if kind else None),
        world=meta["world_size"],
        captured=LAB_DUMPS / name,
    )


def _lab_groups(name: str) -> tuple[str, ...]:
    """Where the dead rank 3's absence shows: the default group; in the tp scenarios its tp
    group 4 and its dp group 2 (docs/lab.md: dp [0, 2] [1, 3] = groups 1, 2; tp [0, 1] [2, 3] =
    groups 3, 4)."""
    return ("4", "2") if name.startswith("tp-") else ("0",)


def lab_scenarios() -> list[Scenario]:
    samples = [
        _sample(
            "outside",
            "captured: at step 6 rank 3 blocks in its data loader; ranks 0-2 wait in all_reduce",
            Expect("missing", (("0", 6),), (3,)),
        ),
        _sample(
            "outside",
            "the same dumps as torch's JSON (_dump_fr_trace_json)",
            Expect("missing", (("0", 6),), (3,)),
            as_json=True,
        ),
        _sample(
            "mismatch",
            "captured: at step 6 rank 0 runs an extra broadcast; ranks 1-3 all_reduce",
            Expect("collective", (("0", 6),), (0,)),
        ),
        _sample(
            "tp-rank-stall",
            "captured dp x tp: rank 3 deadlocks before its tp all_reduce #6 (group 4); rank 2 "
            "waits there, ranks 0-1 in their dp groups",
            Expect("missing", (("4", 6), ("2", 6)), (3,)),
        ),
        _sample(
            "tp-mismatch",
            "captured dp x tp: at #6 of group 4 rank 3 runs all_gather where rank 2 runs "
            "all_reduce (and so does the other tp group)",
            Expect("collective", (("4", 6),), (3,)),
        ),
    ]
    captured = [_lab(p.name) for p in sorted(LAB_DUMPS.glob("*")) if (p / "expected.json").exists()]
    return samples + captured


def all_scenarios() -> list[Scenario]:
    return pytorch_scenarios() + issue_scenarios() + lab_scenarios()
