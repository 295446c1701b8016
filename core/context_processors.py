from .roles import Role, has_role
from .selectors import heartbeat_is_stale, worker_last_seen


def roles_and_workers(request) -> dict:
    """What every page's frame shows: what the user may do, and whether a worker is alive."""
    # DRF's browsable API renders with its own request, whose user is None when logged out
    # (REST_FRAMEWORK["UNAUTHENTICATED_USER"]).
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    last = worker_last_seen()  # read once for the banner's two words
    return {
        "can_respond": has_role(request.user, Role.RESPONDER),
        "is_console_admin": has_role(request.user, Role.ADMIN),
        "worker_last_seen": last,
        "workers_stale": heartbeat_is_stale(last),
    }
