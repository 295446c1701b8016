"""One time budget: the SSH deadlines, the task limits, the sweep and the broker's redelivery
all come from collectors/budget.py, and each outlasts what it must."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from collectors import tasks
from collectors.budget import SNAPSHOT_BUDGET, SnapshotBudget
from collectors.remote import CollectionPlan


def test_a_node_task_outlasts_the_visit_and_the_broker_outlasts_every_task():
    for budget in (SNAPSHOT_BUDGET, SnapshotBudget(visit_s=600, analysis_s=30)):
        # The handshake may take twice the connect time, still inside the visit.
        assert 2 * budget.connect_s < budget.visit_s
        node, analysis = budget.node_task, budget.analysis_task
        assert budget.visit_s < node.soft_s < node.hard_s
        assert analysis.soft_s < analysis.hard_s
        longest = max(node.hard_s, analysis.hard_s, budget.housekeeping_task.hard_s)
        assert budget.redelivery_s >= 2 * longest
        # The sweep waits for a redelivered copy of a lost node task to have had its full run.
        assert budget.stale_after >= timedelta(seconds=budget.redelivery_s + node.hard_s)


def test_the_collector_the_tasks_and_the_settings_take_their_times_from_it():
    plan = CollectionPlan()
    assert (plan.connect_timeout_s, plan.command_timeout_s, plan.total_timeout_s) == (
        SNAPSHOT_BUDGET.connect_s,
        SNAPSHOT_BUDGET.command_s,
        SNAPSHOT_BUDGET.visit_s,
    )
    limits = {
        tasks.collect_node: SNAPSHOT_BUDGET.node_task,
        tasks.analyse_snapshot: SNAPSHOT_BUDGET.analysis_task,
    }
    for task, expected in limits.items():
        assert (task.soft_time_limit, task.time_limit) == (expected.soft_s, expected.hard_s)
    assert tasks.collect_node.max_retries == SNAPSHOT_BUDGET.attempts - 1
    housekeeping = SNAPSHOT_BUDGET.housekeeping_task
    assert housekeeping.soft_s == settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert housekeeping.hard_s == settings.CELERY_TASK_TIME_LIMIT


def test_the_broker_redelivers_after_the_budget_says(monkeypatch):
    from console.settings import base

    monkeypatch.setattr(base, "REDIS_URL", "redis://127.0.0.1:6379/0")
    _url, options = base.broker_from_env()
    assert options["visibility_timeout"] == SNAPSHOT_BUDGET.redelivery_s
