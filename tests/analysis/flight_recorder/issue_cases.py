"""The cases issue 17 lists beyond PyTorch's tests: dtypes, state, an all_reduce's input
against its output, coalesced groups, ranks without a dump, send/recv, sequence ties across
groups, groups issued in different orders, split groups, rooted and uneven collectives."""

from __future__ import annotations

from tests.analysis.flight_recorder.scenario import MATCHED, Expect, Scenario
from tests.analysis.flight_recorder.torch_format import Op, Rank


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
            "rank-never-issued-one-dump-missing",
            "issue",
            "4 ranks; rank 1 never issued #6, which ranks 0 and 2 wait in; rank 3 left no dump "
            "(its dump was not collected): the dumps name rank 1, and nothing names rank 3",
            Expect("missing", (("0", 6),), (1,)),
            tuple(Rank(r, _steps(r, 5) if r == 1 else stuck(r)) for r in range(3)),
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
