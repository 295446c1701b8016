"""Settings shared by every environment. Everything that varies comes from the environment.

DATABASE_URL  PostgreSQL (postgres://...) or any dj-database-url URL; default: SQLite under var/.
REDIS_URL     Celery broker; default: kombu's filesystem transport under var/broker (no server).
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from hangdesk.budget import TIME_BUDGET

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("HANGDESK_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false)")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int(name: str, default: int, *, low: int, high: int, unit: str = "") -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        of = f" of {unit}" if unit else ""
        raise ImproperlyConfigured(f"{name}={raw!r} must be a whole number{of} ({low}-{high})")
    return int(raw)


def env_minutes(name: str, default: int) -> int:
    return env_int(name, default, low=1, high=7 * 24 * 60, unit="minutes")


DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI and Redoc as static files from the package (no CDN): /api/docs/.
    "drf_spectacular_sidecar",
    # The project's own apps, lowest floor first: each imports only the ones listed before
    # it (docs/architecture.md, "Homes"; tests/test_architecture.py holds them to it).
    "core",
    "clusters",
    "incidents",
    "collectors",
    "watch",
    "sharing",
    "pages",
    "console",
]

MIDDLEWARE = [
    # First, so it sees every response last: shared pages (/s/) leave with no cookie.
    "sharing.middleware.SharedPageMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.headers.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Ends sessions idle too long or too old, before anything else sees the user.
    "core.sessions.SessionLimitsMiddleware",
    # Refuses a body over its cap from Content-Length, before CSRF reads (and spools) it.
    "core.bodycap.BodyCapMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "core.middleware.AppErrorMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.context_processors.roles_and_workers",
            ],
        },
    }
]


def database_from_env() -> dict:
    url = os.environ.get("DATABASE_URL")
    if url:
        try:
            config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from exc
        return config
    return {
        # Django's backend, which makes VAR_DIR when it first connects (never at import).
        "ENGINE": "console.sqlite3",
        "NAME": VAR_DIR / "hangdesk.sqlite3",
        # The web process and the worker write concurrently; wait instead of failing.
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
    }


DATABASES = {"default": database_from_env()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Django's backend behind the login throttle (core/throttle.py): this many failures for one
# user name from one address within the window lock that pair out until the window passes.
AUTHENTICATION_BACKENDS = ["core.throttle.ThrottledModelBackend"]
LOGIN_FAILURE_LIMIT = env_int("HANGDESK_LOGIN_FAILURE_LIMIT", 5, low=1, high=1000)
LOGIN_FAILURE_WINDOW_SECONDS = env_int(
    "HANGDESK_LOGIN_FAILURE_WINDOW_SECONDS", 900, low=1, high=7 * 24 * 3600, unit="seconds"
)
# A console session ends when the browser closes, after HANGDESK_SESSION_IDLE_MINUTES (60)
# without a request, and 12 hours after the login (core/sessions.py).
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_AGE = 12 * 3600
SESSION_IDLE_SECONDS = env_minutes("HANGDESK_SESSION_IDLE_MINUTES", 60) * 60
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pages:incident_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # plotly.js exactly as the pinned plotly package ships it: one version, no CDN.
    # Found without importing plotly (~20 ms of start-up for every command).
    ("vendor/plotly", Path(find_spec("plotly").origin).parent / "package_data"),
]
# Served by WhiteNoise straight from the source folders; prod collects them (settings/prod.py).
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.api_auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["core.api_auth.RolePermission"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "hangdesk API",
    "DESCRIPTION": "Incidents, clusters and snapshots of hung distributed training jobs.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs pages need a login or a token, like the API they describe.
    "SERVE_PERMISSIONS": ["core.api_auth.RolePermission"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "IncidentStatusEnum": "incidents.models.Status",
        "SnapshotStatusEnum": "collectors.models.SnapshotStatus",
        "NodeStatusEnum": "collectors.models.NodeStatus",
    },
}

# Celery. Snapshots fan out over SSH on their own queue so they can get their own workers.
REDIS_URL = os.environ.get("REDIS_URL", "")
BROKER_DIR = VAR_DIR / "broker"


def broker_from_env() -> tuple[str, dict]:
    if REDIS_URL:
        if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
            raise ImproperlyConfigured(f"REDIS_URL must start with redis:// (got {REDIS_URL!r})")
        # A message whose worker died unacknowledged comes back after this long; it must
        # outlast the longest task (hangdesk/budget.py derives it from the tasks' limits).
        return REDIS_URL, {"visibility_timeout": TIME_BUDGET.redelivery_s}
    # The folders are made by the Celery app when it first reads this (core/celery.py).
    folder = str(BROKER_DIR)
    return "filesystem://", {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "store_processed": False,
        "control_folder": str(BROKER_DIR / "control"),
    }


CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = broker_from_env()
CELERY_TASK_IGNORE_RESULT = True
# Results are kept only for the few tasks a page waits on (a node's key and connection check,
# collectors.tasks.node_check); every other task ignores its result.
if REDIS_URL.startswith("unix://"):
    CELERY_RESULT_BACKEND = "redis+socket://" + REDIS_URL.removeprefix("unix://")
else:
    CELERY_RESULT_BACKEND = REDIS_URL or f"file://{BROKER_DIR / 'results'}"
CELERY_RESULT_EXPIRES = 600
CELERY_TASK_ACKS_LATE = True  # a killed worker's task is redelivered, tasks are idempotent
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# For tasks without limits of their own (beat's housekeeping); the snapshot tasks set theirs.
CELERY_TASK_TIME_LIMIT = TIME_BUDGET.housekeeping_task.hard_s
CELERY_TASK_SOFT_TIME_LIMIT = TIME_BUDGET.housekeeping_task.soft_s
# Queues by workload: SSH fan-out (many short I/O-bound visits), analysis (few, CPU-heavy),
# housekeeping (beat's tasks) on the default queue.
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "collectors.tasks.collect_nodes": {"queue": "ssh"},
    "collectors.tasks.node_check": {"queue": "ssh"},
    "collectors.tasks.node_check_record": {"queue": "ssh"},
    "collectors.tasks.job_plan_read": {"queue": "ssh"},
    # The watch's SSH work: one period's node reads, a preflight's visits.
    "watch.tasks.watch_cluster": {"queue": "ssh"},
    "watch.tasks.preflight_cluster": {"queue": "ssh"},
    # The final verdicts: a snapshot's, and one made again once its GPU metrics landed.
    "collectors.tasks.analyse_snapshot": {"queue": "analysis"},
    "collectors.tasks.analyse_with_gpu_metrics": {"queue": "analysis"},
    # What is done before the last node (the first verdict, its deadline's check, the GPU
    # metrics read from the click): on processes of its own, so the final verdict never
    # queues behind a first one about to be dropped or a Prometheus read; not "default"
    # either (the ssh worker serves it: a node visit would wait for a slot).
    "collectors.tasks.analyse_provisional": {"queue": "early"},
    "collectors.tasks.analyse_provisional_at_deadline": {"queue": "early"},
    "collectors.tasks.read_gpu_metrics": {"queue": "early"},
    # A large snapshot's parses read as its nodes arrive (collectors/read_ahead.py): a process
    # of its own, held for the whole collection, so no first verdict or GPU read waits for it.
    "collectors.tasks.read_parses_ahead": {"queue": "ahead"},
}
# The workers `make run` starts (and the worker tests start the same way): every queue has
# one, and an analysis only ever occupies the analysis worker's processes, so a large one
# never holds up a snapshot's node visits; the early worker's two processes let a first
# verdict and a GPU read run at once.
HANGDESK_WORKERS = {
    "ssh": {"queues": ["ssh", "default"], "concurrency": 4},
    "analysis": {"queues": ["analysis"], "concurrency": 2},
    "early": {"queues": ["early"], "concurrency": 2},
    "ahead": {"queues": ["ahead"], "concurrency": 1},
}
# Snapshots of at least this many nodes have their parses read ahead (0: none): under it the
# read back after the last node is short (0.55 s at 4,000 nodes and 32,000 ranks).
HANGDESK_READ_AHEAD_NODES = env_int("HANGDESK_READ_AHEAD_NODES", 1000, low=0, high=1_000_000)
# Nodes one ssh worker process visits at once (threads inside its node task, each visit its
# own SSH connection); a snapshot's nodes go out in batches of this many.
HANGDESK_SSH_FANOUT = env_int("HANGDESK_SSH_FANOUT", 64, low=1, high=512)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "core.tasks.record_worker_heartbeat", "schedule": 30.0},
    "fail-stale-collections": {"task": "collectors.tasks.fail_stale_collections", "schedule": 60.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")


def env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        value = float(raw) if raw.strip() else default
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number of seconds") from exc
    if not 0 < value < 86400:
        raise ImproperlyConfigured(f"{name}={raw!r} must be between 0 and 86400 seconds")
    return value


def env_egress_rules(name: str) -> list[str]:
    from core.egress import parse_rules  # stdlib + lazy settings: safe to import here

    entries = env_list(name, [])
    try:
        parse_rules(tuple(entries))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from exc
    return entries


def env_networks(name: str) -> list[str]:
    from core.clients import parse_networks

    entries = env_list(name, [])
    try:
        parse_networks(tuple(entries))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from exc
    return entries


# Reverse proxies whose X-Forwarded-For is believed (addresses or CIDRs; core/clients.py): the
# client address every per-client control uses (login throttle, share links, /metrics, audit).
TRUSTED_PROXIES = env_networks("HANGDESK_TRUSTED_PROXIES")

# Egress (core/egress.py, docs/security.md "Egress"): every outbound connection a user can aim
# (webhooks, pagers, metrics stores, Slurm controllers, Ray heads). Webhooks, pagers and metrics
# reach public addresses only; SSH also private and loopback ones. ALLOW: CIDRs, host names and
# .domain suffixes permitted for any purpose; DENY: refused always, checked first.
EGRESS_ALLOW = env_egress_rules("HANGDESK_EGRESS_ALLOW")
EGRESS_DENY = env_egress_rules("HANGDESK_EGRESS_DENY")
# A CA (PEM file) trusted for HTTPS receivers on top of the system's, for an internal pager.
EGRESS_CA_FILE = os.environ.get("HANGDESK_EGRESS_CA_FILE", "")

# The watch (watch/, docs/operations.md "Watching a cluster"): beat claims every watched
# cluster each period (one watch task in flight per cluster), reads its nodes cheaply, and on
# a hang opens or joins an incident, takes two snapshots and calls the cluster's webhook.
HANGDESK_BASE_URL = os.environ.get("HANGDESK_BASE_URL", "http://localhost:8000").rstrip("/")
WATCH_PERIOD_S = env_seconds("HANGDESK_WATCH_PERIOD_S", 30.0)
WATCH_SECOND_SNAPSHOT_AFTER_S = env_seconds("HANGDESK_WATCH_SECOND_SNAPSHOT_S", 20.0)
# SSH reads side by side within one cluster's period (1,000 nodes: docs/performance.md).
WATCH_NODE_THREADS = 64
WATCH_TAIL_BYTES = 8192  # per log file of a step node, per period
# The old name of HANGDESK_EGRESS_ALLOW for webhooks (below): its hosts are permitted, and
# webhooks go only to them, as before (`manage.py check` says it is the old name).
WATCH_WEBHOOK_HOSTS = env_egress_rules("HANGDESK_WATCH_WEBHOOK_HOSTS")
WATCH_WEBHOOK_ATTEMPTS = 5
WATCH_WEBHOOK_BACKOFF_S = 5  # then 10, 20, 40 s (Celery's exponential retry backoff)
WATCH_WEBHOOK_TIMEOUT_S = 5.0
# Heartbeats one watch takes a second: this, or the cluster's expected world size if larger.
WATCH_HEARTBEATS_PER_S = 10
CELERY_BEAT_SCHEDULE["watch-dispatch"] = {
    "task": "watch.tasks.watch_dispatch",
    "schedule": WATCH_PERIOD_S,
}
# Push clusters (collectors/push.py): a snapshot waits this long for its nodes' bundles; its
# upload tokens expire then, and the sweep analyses what arrived.
PUSH_WAIT_S = env_seconds("HANGDESK_PUSH_WAIT_S", 1800.0)
# A cluster's Prometheus (its prometheus_url; collectors/gpumetrics.py): the DCGM series of the
# window before a snapshot, at this step, each query within the timeout.
GPU_METRICS_WINDOW_S = env_seconds("HANGDESK_GPU_METRICS_WINDOW_S", 3600.0)
GPU_METRICS_STEP_S = env_seconds("HANGDESK_GPU_METRICS_STEP_S", 30.0)
GPU_METRICS_TIMEOUT_S = 10.0
# After the last node, how long the verdict waits for GPU metrics still being read from the
# click (collectors/gpuclick.py); past it, it is made without them, and again when they land.
GPU_METRICS_WAIT_S = env_seconds("HANGDESK_GPU_METRICS_WAIT_S", 3.0)
# Pagers (watch/pagers.py): where PagerDuty's Events API v2 and Opsgenie's Alert API answer
# (EU accounts: https://events.eu.pagerduty.com/v2/enqueue, https://api.eu.opsgenie.com).
PAGERDUTY_EVENTS_URL = os.environ.get(
    "HANGDESK_PAGERDUTY_EVENTS_URL", "https://events.pagerduty.com/v2/enqueue"
)
OPSGENIE_API_URL = os.environ.get("HANGDESK_OPSGENIE_API_URL", "https://api.opsgenie.com")
# A worker not seen for this long is reported as down on every page.
WORKER_STALE_AFTER_SECONDS = 120
# /metrics (console/metrics.py): scrapers from these networks, or any sending this bearer token.
METRICS_ALLOWED_NETWORKS = env_list("HANGDESK_METRICS_NETWORKS", ["127.0.0.0/8", "::1/128"])
METRICS_TOKEN = os.environ.get("HANGDESK_METRICS_TOKEN", "")
# The sweep fails a node visit still unfinished this long after it began (hangdesk/budget.py:
# the broker's redelivery plus a full run of the redelivered task; 15 minutes by default).
SNAPSHOT_STALE_AFTER_SECONDS = TIME_BUDGET.stale_after.total_seconds()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # Two lines per SSH connection at INFO: 8,000 lines for a 4,000-node snapshot.
    "loggers": {"paramiko": {"level": "WARNING"}},
}
