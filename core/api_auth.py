"""Who may call the API: personal tokens (hashed at rest) and the console's roles."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from .models import ApiToken
from .roles import Role, has_role
from .services import TOKEN_PREFIX, api_token_hash


class TokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer hd_...` (or `Token hd_...`), looked up by its hash."""

    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2 or not header[1].startswith(TOKEN_PREFIX):
            raise exceptions.AuthenticationFailed("Malformed token header: use 'Bearer hd_...'.")
        token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=api_token_hash(header[1]))
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        now = timezone.now()
        state = token.state_at(now)
        if state != "active":
            raise exceptions.AuthenticationFailed(f"This token is {state}: ask for a new one.")
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="hangdesk"'


class RolePermission(permissions.BasePermission):
    """Reads need any role; writes need the view's `write_role` (responder by default)."""

    def has_permission(self, request, view) -> bool:
        if request.user is None or not request.user.is_authenticated:
            return False
        if request.method in permissions.SAFE_METHODS:
            return has_role(request.user, Role.VIEWER)
        return has_role(request.user, getattr(view, "write_role", Role.RESPONDER))


class TokenScheme(OpenApiAuthenticationExtension):
    """Describes TokenAuthentication in the OpenAPI schema."""

    target_class = "core.api_auth.TokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal token: `manage.py api_token USER --name WHAT`.",
        }
