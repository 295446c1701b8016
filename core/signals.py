"""Signal handlers of core: role -> staff flag, the admin group's permissions, login failures.

- A user in the `admin` group (or a superuser) is staff, so the Admin link opens the admin
  site; everyone else is not. Kept whenever groups change or a user is saved.
- The `admin` group holds the permissions the role needs in the admin site (users, groups,
  clusters and nodes, tokens; reading the audit log), granted after every migrate.
- Failed logins are counted for the throttle (core/throttle.py); a success clears them.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import m2m_changed, post_migrate, post_save

from . import throttle
from .clients import client_ip
from .models import AuditAction
from .roles import Role

# App labels whose every permission the admin role holds; plus reading these models.
ADMIN_APPS = ("auth", "clusters")
ADMIN_MODELS = {
    ("core", "apitoken"): None,
    ("core", "auditevent"): ("view",),
    ("core", "loginfailure"): ("view", "delete"),
}


def sync_staff(user) -> None:
    """is_staff = superuser or member of the admin group (one UPDATE when it differs)."""
    staff = user.is_superuser or user.groups.filter(name=Role.ADMIN.value).exists()
    if user.is_staff != staff:
        get_user_model().objects.filter(pk=user.pk).update(is_staff=staff)
        user.is_staff = staff
    if hasattr(user, "_hangdesk_groups"):
        del user._hangdesk_groups  # the role cache of this object is stale now


def _groups_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if not reverse:
        sync_staff(instance)
        return
    # group.user_set.add(...): the instance is the group.
    users = get_user_model().objects.filter(pk__in=pk_set) if pk_set else instance.user_set.all()
    if action == "post_clear":
        users = get_user_model().objects.filter(is_staff=True, is_superuser=False)
    for user in users:
        sync_staff(user)


def _user_saved(sender, instance, created, raw=False, **kwargs) -> None:
    if raw or (created and not instance.is_staff and not instance.is_superuser):
        return
    sync_staff(instance)


def grant_admin_permissions(**kwargs) -> None:
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=Role.ADMIN.value)
    wanted = list(Permission.objects.filter(content_type__app_label__in=ADMIN_APPS))
    for (app, model), actions in ADMIN_MODELS.items():
        permissions = Permission.objects.filter(
            content_type__app_label=app, content_type__model=model
        )
        if actions:
            permissions = permissions.filter(codename__in=[f"{a}_{model}" for a in actions])
        wanted.extend(permissions)
    group.permissions.add(*wanted)


def _login_failed(sender, credentials, request=None, **kwargs) -> None:
    username = credentials.get("username")
    if request is None or throttle.is_locked(username, request):
        return
    throttle.record_failure(username, request)
    if throttle.is_locked(username, request):
        from .services import audit_record

        audit_record(
            user=None,
            action=AuditAction.LOGIN_LOCKED,
            target=f"user name {username!r}"[:200],
            via="login",
            ip=client_ip(request),
        )


def _logged_in(sender, request, user, **kwargs) -> None:
    if request is not None:
        throttle.forget_failures(user.get_username(), request)


def connect() -> None:
    user_model = get_user_model()
    m2m_changed.connect(
        _groups_changed, sender=user_model.groups.through, dispatch_uid="core-staff"
    )
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="core-staff-save")
    post_migrate.connect(grant_admin_permissions, dispatch_uid="core-admin-permissions")
    user_login_failed.connect(_login_failed, dispatch_uid="core-login-failed")
    user_logged_in.connect(_logged_in, dispatch_uid="core-logged-in")
