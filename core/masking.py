"""The console's key for masking fingerprints (analysis/secrets.py), derived from SECRET_KEY.

Every process of one installation (web, workers, commands) derives the same key, so a value
masked by the analysis worker and one masked by the web process carry the same fingerprint;
another installation's fingerprints say nothing about this one's values.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.crypto import salted_hmac

from analysis import secrets


def masking_key() -> bytes:
    return salted_hmac("hangdesk.masking", "fingerprint", secret=settings.SECRET_KEY).digest()


def configure_masking() -> None:
    """Make the console's key the default of every mask_* call (called from CoreConfig.ready)."""
    if settings.SECRET_KEY:
        secrets.set_default_key(masking_key())
