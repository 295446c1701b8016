"""API tokens are named, listed, expiring and revocable, and a revoked one fails at once;
logins are throttled per user name and address (issue 11)."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from core.models import ApiToken, AuditAction, AuditEvent, LoginFailure
from core.services import api_token_create, api_token_revoke

pytestmark = pytest.mark.django_db


def _client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_a_revoked_token_fails_on_its_very_next_request(bob):
    token, secret = api_token_create(user=bob, name="watchdog")
    client = _client(secret)
    assert client.get("/api/v1/incidents/").status_code == 200
    api_token_revoke(token=token, by=bob)
    refused = client.get("/api/v1/incidents/")
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]


def test_a_token_expires_after_90_days_by_default(bob):
    token, secret = api_token_create(user=bob, name="watchdog")
    lifetime = token.expires_at - token.created_at
    assert timedelta(days=89) < lifetime <= timedelta(days=90)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    refused = _client(secret).get("/api/v1/incidents/")
    assert refused.status_code == 401
    assert "expired" in refused.json()["detail"]


def test_the_command_lists_creates_and_revokes_tokens(bob, capsys):
    call_command("api_token", "create", "bob", "--name", "ci", "--days", "7")
    secret = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(name="ci")
    assert timedelta(days=6) < token.expires_at - timezone.now() <= timedelta(days=7)
    call_command("api_token", "list")
    listing = capsys.readouterr().out
    assert token.prefix in listing and "active" in listing and "ci" in listing
    assert secret not in listing
    call_command("api_token", "revoke", token.prefix)
    assert "revoked" in capsys.readouterr().out
    assert _client(secret).get("/api/v1/incidents/").status_code == 401
    call_command("api_token", "list", "bob")
    assert "revoked" in capsys.readouterr().out
    with pytest.raises(CommandError, match="already revoked"):
        call_command("api_token", "revoke", str(token.pk))
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {AuditAction.TOKEN_CREATED, AuditAction.TOKEN_REVOKED} <= actions


def test_an_admin_lists_and_revokes_tokens_in_the_admin_site(alice, bob, client):
    token, secret = api_token_create(user=bob, name="watchdog")
    client.force_login(alice)  # in the admin group, not a superuser
    listing = client.get("/admin/core/apitoken/")
    assert listing.status_code == 200
    assert token.prefix in listing.content.decode()
    done = client.post(
        "/admin/core/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
        follow=True,
    )
    assert done.status_code == 200
    assert _client(secret).get("/api/v1/incidents/").status_code == 401
    assert client.get("/admin/core/auditevent/").status_code == 200


def _fail_login(client, username: str):
    return client.post(reverse("login"), {"username": username, "password": "wrong"})


def test_login_is_locked_after_five_failures_for_that_user_and_address(bob, client):
    for _ in range(4):
        assert _fail_login(client, "bob").status_code == 200
    locked = _fail_login(client, "bob")  # the fifth failure locks, and says so
    assert locked.status_code == 429
    assert locked["Retry-After"] == "900"
    assert "Too many failed logins" in locked.content.decode()
    # Even the right password is refused while locked: nothing is checked.
    right = client.post(reverse("login"), {"username": "bob", "password": "bob-password"})
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session
    # The admin site's login goes through the same backend.
    admin = client.post("/admin/login/", {"username": "bob", "password": "bob-password"})
    assert "_auth_user_id" not in client.session
    assert admin.status_code == 200
    assert AuditEvent.objects.filter(action=AuditAction.LOGIN_LOCKED).count() == 1


def test_the_lock_ends_with_its_window_and_a_success_clears_the_count(bob, client):
    for _ in range(5):
        _fail_login(client, "bob")
    LoginFailure.objects.update(at=timezone.now() - timedelta(minutes=16))
    ok = client.post(reverse("login"), {"username": "bob", "password": "bob-password"})
    assert ok.status_code == 302
    assert LoginFailure.objects.filter(username="bob").count() == 0


def test_another_user_from_the_same_address_is_not_locked_by_a_few_failures(bob, carol, client):
    for _ in range(5):
        _fail_login(client, "bob")
    ok = client.post(reverse("login"), {"username": "carol", "password": "carol-password"})
    assert ok.status_code == 302


def test_password_spraying_from_one_address_is_locked_too(bob, client):
    for n in range(20):
        _fail_login(client, f"user{n}")
    assert _fail_login(client, "bob").status_code == 429


def test_an_admin_lifts_a_lock_by_deleting_the_failures(alice, bob, client):
    for _ in range(5):
        _fail_login(client, "bob")
    client.force_login(alice)
    failures = list(LoginFailure.objects.filter(username="bob").values_list("pk", flat=True))
    client.post(
        "/admin/core/loginfailure/",
        {"action": "delete_selected", "_selected_action": failures, "post": "yes"},
    )
    client.logout()
    ok = client.post(reverse("login"), {"username": "bob", "password": "bob-password"})
    assert ok.status_code == 302
