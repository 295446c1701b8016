import hashlib
import secrets
from datetime import datetime

from django.utils import timezone

from .models import ApiToken, WorkerHeartbeat

TOKEN_PREFIX = "hd_"  # noqa: S105 - a marker that makes leaked tokens greppable, not a secret


def worker_heartbeat_record(*, hostname: str, at: datetime | None = None) -> WorkerHeartbeat:
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"seen_at": at or timezone.now()}
    )
    return heartbeat


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """Create a token for `user`; returns the row and the secret, which is not kept."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, key_hash=api_token_hash(secret), prefix=secret[:11]
    )
    return token, secret


def api_token_hash(secret: str) -> str:
    # Tokens are 256 random bits: a plain SHA-256 is enough, no slow hash needed.
    return hashlib.sha256(secret.encode()).hexdigest()
