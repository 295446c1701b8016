"""One time budget: the SSH deadlines, every task's limits, the sweep and the broker's
redelivery all come from hangdesk/budget.py, and each outlasts what it must."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from collectors import tasks
from core.celery import app
from hangdesk.budget import TIME_BUDGET, TimeBudget
from hangdesk.plan import CollectionPlan


def test_a_node_task_outlasts_the_visit_and_the_broker_outlasts_every_task():
    for budget in (TIME_BUDGET, TimeBudget(visit_s=600, analysis_s=30)):
        # The handshake may take twice the connect time, still inside the visit.
        assert 2 * budget.connect_s < budget.visit_s
        node, analysis = budget.node_task, budget.analysis_task
        assert budget.visit_s < node.soft_s < node.hard_s
        assert analysis.soft_s < analysis.hard_s
        longest = max(limits.hard_s for limits in budget.every_task())
        assert longest >= max(node.hard_s, analysis.hard_s, budget.housekeeping_task.hard_s)
        assert budget.redelivery_s >= 2 * longest
        # The sweep waits for a redelivered copy of a lost node task to have had its full run.
        assert budget.stale_after >= timedelta(seconds=budget.redelivery_s + node.hard_s)


def test_the_collector_the_tasks_and_the_settings_take_their_times_from_it():
    plan = CollectionPlan()
    assert (plan.connect_timeout_s, plan.command_timeout_s, plan.total_timeout_s) == (
        TIME_BUDGET.connect_s,
        TIME_BUDGET.command_s,
        TIME_BUDGET.visit_s,
    )
    limits = {
        tasks.collect_nodes: TIME_BUDGET.node_task,
        tasks.analyse_snapshot: TIME_BUDGET.analysis_task,
        tasks.read_parses_ahead: TIME_BUDGET.analysis_task,
    }
    for task, expected in limits.items():
        assert (task.soft_time_limit, task.time_limit) == (expected.soft_s, expected.hard_s)
    housekeeping = TIME_BUDGET.housekeeping_task
    assert housekeeping.soft_s == settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert housekeeping.hard_s == settings.CELERY_TASK_TIME_LIMIT


def test_the_broker_redelivers_after_the_budget_says(monkeypatch):
    from console.settings import base

    monkeypatch.setattr(base, "REDIS_URL", "redis://127.0.0.1:6379/0")
    _url, options = base.broker_from_env()
    assert options["visibility_timeout"] == TIME_BUDGET.redelivery_s


def test_every_task_of_every_app_takes_its_limits_from_the_budget():
    app.loader.import_default_modules()  # every app's tasks.py, as a worker loads them
    budgeted = {(limits.soft_s, limits.hard_s) for limits in TIME_BUDGET.every_task()}
    ours = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert len(ours) >= 15
    for name, task in ours.items():
        soft = task.soft_time_limit or settings.CELERY_TASK_SOFT_TIME_LIMIT
        hard = task.time_limit or settings.CELERY_TASK_TIME_LIMIT
        assert (soft, hard) in budgeted, name


def test_a_watch_claim_outlives_the_task_that_holds_it():
    from watch import claims, limits

    tick = TIME_BUDGET.watch_tick_task
    assert tick.soft_s < tick.hard_s < claims.CLAIM_LEASE.total_seconds()
    assert limits.LEASE == claims.CLAIM_LEASE
