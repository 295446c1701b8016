"""Share links: a read-only door to one incident's published post-mortem, for people without
an account. The token is shown once; only its SHA-256 is kept."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from incidents.models import Incident, PostMortemVersion


class ShareLink(models.Model):
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="share_links")
    token_hash = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=120, blank=True)
    include_evidence = models.BooleanField(
        default=False, help_text="Also show the evidence summary (verdict, groups, env diff)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="share_links_created",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="share_links_revoked",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"share link {self.pk} of {self.incident.reference}"

    @property
    def state(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at <= timezone.now():
            return "expired"
        return "active"


class PublishedDocument(models.Model):
    """A published post-mortem version's document as it stood when it was published: the
    console's verdict with its evidence lines, the rank chart's data, the evidence summary,
    the decisions and the pinned timeline (sharing/frozen.py). A share link shows this, never
    what the incident holds today. Versions published before it existed are frozen when first
    shared or opened (`frozen_at` says when)."""

    version = models.OneToOneField(
        PostMortemVersion, on_delete=models.CASCADE, related_name="published_document"
    )
    schema = models.PositiveSmallIntegerField(default=1)
    frozen_at = models.DateTimeField()
    content = models.JSONField()

    def __str__(self) -> str:
        return f"{self.version} as published"


class ShareView(models.Model):
    """One opening of a share link: when, from where, with what."""

    link = models.ForeignKey(ShareLink, on_delete=models.CASCADE, related_name="views")
    at = models.DateTimeField(default=timezone.now)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["at"])]  # pruned by age (sharing/services.py)

    def __str__(self) -> str:
        return f"{self.link} opened {self.at:%Y-%m-%d %H:%M:%S} from {self.ip}"


class ShareHit(models.Model):
    """Every request for a shared page, known token or not, within the rate-limit window (older
    rows are deleted as new ones come), so every web process shares the count."""

    ip = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["ip", "at"]), models.Index(fields=["at"])]

    def __str__(self) -> str:
        return f"{self.ip} at {self.at:%H:%M:%S}"
