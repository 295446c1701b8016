"""Project package: settings, URLs and the Celery app.

The Celery app (`console.celery`) is imported by the task modules, so it is configured
before any task is sent, and found by `celery -A console`; it is not imported here, so
management commands that send no task start without loading Celery (~0.14 s).
"""

__all__ = ["celery_app"]


def __getattr__(name: str):
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
