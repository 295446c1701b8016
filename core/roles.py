"""Three roles, kept as Django groups so admins manage them in the admin site.

viewer: reads everything. responder: opens and works incidents, takes snapshots.
admin: manages clusters, nodes and users. Superusers are admins.
"""

from enum import StrEnum
from functools import wraps

from django.core.exceptions import PermissionDenied


class Role(StrEnum):
    VIEWER = "viewer"
    RESPONDER = "responder"
    ADMIN = "admin"


_RANK = {Role.VIEWER: 0, Role.RESPONDER: 1, Role.ADMIN: 2}


def role_of(user) -> Role | None:
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    # Cached per request object: pages ask several times.
    names = getattr(user, "_hangdesk_groups", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._hangdesk_groups = names
    for role in (Role.ADMIN, Role.RESPONDER, Role.VIEWER):
        if role.value in names:
            return role
    return Role.VIEWER


def has_role(user, needed: Role) -> bool:
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[needed]


def role_required(needed: Role):
    """View decorator: 403 unless the logged-in user has at least `needed`."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not has_role(request.user, needed):
                raise PermissionDenied(f"This needs the {needed.value} role.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator
