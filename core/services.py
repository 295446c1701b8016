import hashlib
import secrets
from datetime import datetime, timedelta

from django.utils import timezone

from . import clients
from .errors import Conflict, Invalid
from .models import ApiToken, AuditAction, AuditEvent, WorkerHeartbeat

TOKEN_PREFIX = "hd_"  # noqa: S105 - a marker that makes leaked tokens greppable, not a secret
# A token lives this long unless its creator says otherwise.
DEFAULT_TOKEN_DAYS = 90
MAX_TOKEN_DAYS = 3650


def worker_heartbeat_record(*, hostname: str, at: datetime | None = None) -> WorkerHeartbeat:
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"seen_at": at or timezone.now()}
    )
    return heartbeat


def api_token_create(
    *, user, name: str, days: int | None = DEFAULT_TOKEN_DAYS, by=None, via: str = ""
) -> tuple[ApiToken, str]:
    """Create a token for `user`; returns the row and the secret, which is not kept.

    `days`: its lifetime (90 unless said); None: it never expires, for whoever asks for that.
    """
    if days is not None and not 1 <= days <= MAX_TOKEN_DAYS:
        raise Invalid(f"A token lives 1 to {MAX_TOKEN_DAYS} days (got {days}).", field="days")
    if not name.strip():
        raise Invalid("Name the token after what will use it.", field="name")
    now = timezone.now()
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip()[:100],
        key_hash=api_token_hash(secret),
        prefix=secret[:11],
        expires_at=None if days is None else now + timedelta(days=days),
    )
    audit_record(
        user=by or user,
        action=AuditAction.TOKEN_CREATED,
        target=f"token {token.prefix}… ({token.name}) for {user.get_username()}",
        via=via,
    )
    return token, secret


def api_token_revoke(*, token: ApiToken, by=None, via: str = "") -> ApiToken:
    """Revoke now: the next request with it is refused. Revoking twice is refused."""
    now = timezone.now()
    revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=now, revoked_by=by
    )
    if not revoked:
        raise Conflict(f"Token {token.prefix}… is already revoked.")
    token.revoked_at, token.revoked_by = now, by
    audit_record(
        user=by,
        action=AuditAction.TOKEN_REVOKED,
        target=f"token {token.prefix}… ({token.name}) for {token.user.get_username()}",
        via=via,
    )
    return token


def api_token_hash(secret: str) -> str:
    # Tokens are 256 random bits: a plain SHA-256 is enough, no slow hash needed.
    return hashlib.sha256(secret.encode()).hexdigest()


def audit_record(
    *,
    user,
    action: str,
    target: str,
    incident_id: int | None = None,
    snapshot_id: int | None = None,
    via: str = "",
    ip: str | None = None,
) -> AuditEvent:
    """One line of the audit log (raw evidence read, export, token made or revoked)."""
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    return AuditEvent.objects.create(
        user=user if authenticated else None,
        username=user.get_username() if authenticated else "",
        action=action,
        target=target[:500],
        incident_id=incident_id,
        snapshot_id=snapshot_id,
        via=via[:16],
        ip=ip or None,
    )


def client_ip(request) -> str | None:
    """The address the request came from, through trusted proxies (core/clients.py)."""
    return clients.client_ip(request)
