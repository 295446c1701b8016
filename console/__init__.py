"""The project package: settings, root URLs, the WSGI app, the Celery entry point and the
commands that compose the apps (runconsole). Nothing of the apps imports it.

`console.celery_app` is the app of core/celery.py, which the task modules import, so it is
configured before any task is sent; it is not imported here, so management commands that send
no task start without loading Celery (~0.14 s).
"""

__all__ = ["celery_app"]


def __getattr__(name: str):
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
