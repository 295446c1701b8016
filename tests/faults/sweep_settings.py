"""Settings for the worker and beat the sweep tests start: the suite's settings with a short
sweep (a node visit is stale after 3 s, the sweep runs every second), so "the whole worker
gone" is proven in seconds instead of the production 13 minutes."""

from console.settings.test import *  # noqa: F403

SNAPSHOT_STALE_AFTER_SECONDS = 3.0
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,  # noqa: F405
    "fail-stale-collections": {"task": "collectors.tasks.fail_stale_collections", "schedule": 1.0},
}
