from .roles import Role, has_role
from .selectors import worker_last_seen, workers_are_stale


def roles_and_workers(request) -> dict:
    """What every page's frame shows: what the user may do, and whether a worker is alive."""
    # DRF's browsable API renders with its own request, whose user is None when logged out
    # (REST_FRAMEWORK["UNAUTHENTICATED_USER"]).
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "can_respond": has_role(request.user, Role.RESPONDER),
        "is_console_admin": has_role(request.user, Role.ADMIN),
        "worker_last_seen": worker_last_seen(),
        "workers_stale": workers_are_stale(),
    }
