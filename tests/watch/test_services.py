"""The watch's writes: claims, periods, raises (one per hang), heartbeats, the page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from incidents.models import EventKind, Incident
from incidents.services import incident_open
from tests.watch.receiver import Receiver
from watch import claims, configure, period, raises, visits
from watch.models import NotifyStatus, StepSample, Watch, WatchRaise
from watch.reading import NodeReading, Process


def stepping(now, last_step: int, every: float = 0.5) -> str:
    lines = []
    for step in range(max(1, last_step - 19), last_step + 1):
        at = now - timedelta(seconds=every * (last_step - step))
        stamp = at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"
        lines.append(f"{stamp} INFO [rank0] host=gpu-0 step={step} loss=1 step_time={every}s")
    return "\n".join(lines) + "\n"


class FakeNodes:
    """What each period's read returns: every node up, ranks 5 and 6 on each."""

    def __init__(self, monkeypatch):
        self.pids = {"gpu-0": [5, 6], "gpu-1": [5, 6]}
        self.log = ""
        self.calls = 0
        self.elapsed_s = 10  # how long ago the training processes started
        self.stacks_asked: list[bool] = []
        monkeypatch.setattr(visits, "read_nodes", self.read)

    def read(self, cluster, nodes, *, with_logs, with_stacks=False):
        self.calls += 1
        self.stacks_asked.append(with_stacks)
        age = self.elapsed_s
        return [
            NodeReading(
                node=n.name, ok=True,
                processes=[Process(pid, "Sl", age, "python train.py") for pid in self.pids[n.name]],
                logs={"/var/log/train/rank0.log": self.log} if n.name == "gpu-0" else {},
            )
            for n in nodes
        ]  # fmt: skip


@pytest.fixture
def watched(cluster, bob):
    return configure.watch_configure(
        cluster=cluster, by=bob, enabled=True, step_time_multiplier=5, floor_s=10,
        checkpoint_allowance_s=60,
    )  # fmt: skip


@pytest.fixture
def nodes(monkeypatch):
    return FakeNodes(monkeypatch)


def tick(watch: Watch) -> period.TickOutcome:
    """One period, as the task runs it (claim, period, release), a whole period later."""
    Watch.objects.filter(pk=watch.pk).update(dispatched_at=None)
    claimed = dict(claims.watch_claim_due())
    assert watch.pk in claimed, "the watch must be claimable"
    try:
        return period.watch_tick(watch_id=watch.pk, claim=claimed[watch.pk])
    finally:
        claims.watch_release(watch_id=watch.pk, claim=claimed[watch.pk])


def test_a_duplicate_tick_claims_nothing(watched):
    first = claims.watch_claim_due()
    second = claims.watch_claim_due()
    assert [pk for pk, _ in first] == [watched.pk] and second == []


def test_a_period_just_dispatched_is_not_due_again(watched):
    [(pk, claim)] = claims.watch_claim_due()
    assert claims.watch_release(watch_id=pk, claim=claim)
    assert claims.watch_claim_due() == []  # a duplicate beat tick right after
    later = timezone.now() + timedelta(seconds=settings.WATCH_PERIOD_S)
    assert [pk for pk, _ in claims.watch_claim_due(now=later)] == [watched.pk]


def test_a_claim_whose_task_died_expires(watched):
    claims.watch_claim_due()
    assert claims.watch_claim_due() == []
    later = timezone.now() + claims.CLAIM_LEASE + timedelta(seconds=1)
    assert [pk for pk, _ in claims.watch_claim_due(now=later)] == [watched.pk]


def test_a_tick_with_a_stale_claim_does_nothing(watched, nodes):
    claims.watch_claim_due()
    assert period.watch_tick(watch_id=watched.pk, claim="not-the-claim").ran is False
    assert nodes.calls == 0


def test_a_disabled_watch_is_never_claimed(cluster, watched, bob):
    configure.watch_configure(
        cluster=cluster, by=bob, enabled=False, step_time_multiplier=5, floor_s=10,
        checkpoint_allowance_s=60,
    )  # fmt: skip
    assert claims.watch_claim_due() == []


def test_a_healthy_job_raises_nothing_and_is_charted(watched, nodes):
    for _ in range(3):
        nodes.log = stepping(timezone.now(), 40)
        outcome = tick(watched)
        assert outcome.ran and outcome.state == "ok" and outcome.raise_id is None
    watched.refresh_from_db()
    assert watched.last_step == 40 and watched.step_time_s == 0.5
    assert watched.nodes["gpu-0"]["steps"] is True and watched.nodes["gpu-1"]["processes"] == 2
    assert StepSample.objects.filter(watch=watched).count() == 3
    assert not Incident.objects.exists() and not WatchRaise.objects.exists()


def test_a_stall_opens_one_incident_whatever_the_number_of_ticks(watched, nodes):
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    outcomes = [tick(watched) for _ in range(4)]
    assert [o.state for o in outcomes] == ["stalled"] * 4
    assert outcomes[0].raise_created and not any(o.raise_created for o in outcomes[1:])
    assert len({o.raise_id for o in outcomes}) == 1
    incident = Incident.objects.get()
    assert incident.cluster == watched.cluster and "stalled" in incident.title
    raised = WatchRaise.objects.get()
    assert raised.reason == "stalled" and raised.step == 40 and raised.incident == incident
    events = incident.events.filter(kind=EventKind.SYSTEM, source="watch")
    assert events.count() == 1 and "step 40 is" in events.get().summary


def test_a_job_with_no_first_step_past_the_init_threshold_raises_an_init_hang(watched, nodes):
    assert tick(watched).state == "waiting"  # started 10 s ago: still starting
    nodes.elapsed_s = 601  # the default init threshold: 10 minutes
    outcomes = [tick(watched) for _ in range(3)]
    assert [o.state for o in outcomes] == ["init"] * 3
    assert outcomes[0].raise_created and outcomes[0].needs_first_snapshot
    assert not any(o.raise_created for o in outcomes[1:])
    raised = WatchRaise.objects.get()
    assert raised.reason == "init" and raised.step is None
    assert "init" in raised.incident.title or "first step" in raised.incident.title
    assert nodes.stacks_asked == [True] * 4  # no step known yet: the stacks are read


def test_stacks_are_read_only_until_a_first_step(watched, nodes):
    tick(watched)
    nodes.log = stepping(timezone.now() - timedelta(seconds=2), 5)
    tick(watched)
    tick(watched)
    assert nodes.stacks_asked == [True, True, False]


def test_a_second_raise_while_one_is_open_returns_it(watched, nodes):
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    first = tick(watched)
    from watch import progress

    again, created = raises.raise_open(
        watch=watched, now=timezone.now(),
        judgement=progress.Judgement(
            state="stalled", reason="again", last_step=40, last_step_at=None, step_times=(),
            step_time_s=None, recent_step_time_s=None, threshold_s=1, checkpoint_since=None,
            pids={}, raise_reason="stalled",
        ),
    )  # fmt: skip
    assert again.pk == first.raise_id and not created and Incident.objects.count() == 1


def test_a_raise_joins_the_clusters_open_incident(watched, nodes, bob):
    mine = incident_open(opened_by=bob, title="job looks stuck", cluster=watched.cluster)
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    tick(watched)
    assert Incident.objects.get() == mine
    assert "joined this incident" in mine.events.filter(source="watch").get().summary


def test_a_rank_gone_raises_at_once(watched, nodes):
    nodes.log = stepping(timezone.now(), 40)
    assert tick(watched).state == "ok"
    nodes.pids["gpu-1"] = [5]
    outcome = tick(watched)
    assert outcome.state == "gone" and outcome.raise_created
    assert WatchRaise.objects.get().reason == "gone"


def test_progress_again_closes_the_raise(watched, nodes):
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    tick(watched)
    nodes.log = stepping(timezone.now(), 45)
    assert tick(watched).state == "ok"
    raised = WatchRaise.objects.get()
    assert raised.closed_at is not None
    assert raised.incident.events.filter(summary__contains="progresses again").exists()
    # Step 45 stays the last one for a minute: a new hang.
    Watch.objects.filter(pk=watched.pk).update(last_step_at=timezone.now() - timedelta(seconds=60))
    assert tick(watched).raise_created  # a new hang is a new raise (the same open incident)
    assert WatchRaise.objects.count() == 2 and Incident.objects.count() == 1


def test_logs_are_read_on_the_step_node_only_once_it_is_known(watched, cluster):
    nodes = list(cluster.nodes.order_by("name"))
    assert period.log_nodes(watched, nodes) == {"gpu-0", "gpu-1"}
    watched.nodes = {"gpu-0": {"steps": True}, "gpu-1": {"steps": False}}
    assert period.log_nodes(watched, nodes) == {"gpu-0"}
    watched.step_nodes = ["gpu-1"]
    assert period.log_nodes(watched, nodes) == {"gpu-1"}


def test_without_a_step_node_the_logs_are_searched_every_few_periods(watched, cluster):
    nodes = list(cluster.nodes.order_by("name"))
    now = timezone.now()
    watched.log_search_at = now
    assert period.log_nodes(watched, nodes, now=now) == set()  # presence checks only
    later = now + timedelta(seconds=settings.WATCH_PERIOD_S * 10)
    assert period.log_nodes(watched, nodes, now=later) == {"gpu-0", "gpu-1"}


def test_the_first_snapshot_is_started_by_one_task(watched, nodes):
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    raise_id = tick(watched).raise_id
    assert claims.raise_claim_first(raise_id=raise_id, task_id="t1")
    assert claims.raise_claim_first(raise_id=raise_id, task_id="t1")  # its redelivery
    assert not claims.raise_claim_first(raise_id=raise_id, task_id="t2")


def test_unknown_step_nodes_are_refused(cluster, bob):
    from core.errors import Invalid

    with pytest.raises(Invalid):
        configure.watch_configure(
            cluster=cluster, by=bob, enabled=True, step_time_multiplier=5, floor_s=10,
            checkpoint_allowance_s=60, step_nodes=["gpu-9"],
        )  # fmt: skip


def _raise_with_verdict(watched, nodes, url: str) -> WatchRaise:
    Watch.objects.filter(pk=watched.pk).update(webhook_url=url)
    watched.refresh_from_db()
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    raise_id = tick(watched).raise_id
    WatchRaise.objects.filter(pk=raise_id).update(
        verdict={"classification": "A", "summary": "rank 3 left", "suspect_ranks": [3]},
        verdict_at=timezone.now(),
    )
    return WatchRaise.objects.get(pk=raise_id)


def test_the_page_reaches_the_receiver(watched, nodes, settings):
    from watch.tasks import watch_notify

    with Receiver() as receiver:
        raised = _raise_with_verdict(watched, nodes, receiver.url)
        assert raised.notify_status == NotifyStatus.WAITING
        watch_notify.apply(args=(raised.pk,))
    raised.refresh_from_db()
    assert raised.notify_status == NotifyStatus.SENT and raised.notify_attempts == 1
    body = receiver.posts[0]["body"]
    assert "A: rank 3 left" in body["text"] and f"/incidents/{raised.incident_id}/" in body["text"]


def test_a_failing_receiver_is_retried_and_shown_on_the_incident(watched, nodes):
    from watch.tasks import watch_notify

    with Receiver(statuses=[500, 503]) as receiver:
        raised = _raise_with_verdict(watched, nodes, receiver.url)
        watch_notify.apply(args=(raised.pk,))  # eager: Celery runs the retries at once
    raised.refresh_from_db()
    assert [p["status"] for p in receiver.posts] == [500, 503, 200]
    assert raised.notify_status == NotifyStatus.SENT and raised.notify_attempts == 3
    summaries = list(raised.incident.events.filter(details__phase="webhook").values_list(
        "summary", flat=True))  # fmt: skip
    assert summaries == [
        "Watch: webhook attempt 1 failed (HTTP 500); retrying",
        "Watch: webhook attempt 2 failed (HTTP 503); retrying",
        "Watch: webhook delivered (HTTP 200)",
    ]


def test_a_receiver_that_never_answers_ends_failed(watched, nodes, settings):
    from watch.tasks import watch_notify

    with Receiver(statuses=[500] * 10) as receiver:
        raised = _raise_with_verdict(watched, nodes, receiver.url)
        watch_notify.apply(args=(raised.pk,))
    raised.refresh_from_db()
    assert len(receiver.posts) == settings.WATCH_WEBHOOK_ATTEMPTS
    assert raised.notify_status == NotifyStatus.FAILED and raised.notify_error == "HTTP 500"
