"""Each sharing page's one read, a typed record of everything the page shows (the view
validates, calls it, renders; templates only format): the shared page, the share links page,
and the document the print page and the Markdown export show."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from django.db.models import Count, Prefetch
from django.forms import Form

from incidents.models import Incident, PostMortem, PostMortemVersion
from incidents.selectors import latest_published

from .documents import Document, document
from .models import ShareLink, ShareView

# Views listed per link on the links page (the newest); the count is always complete.
VIEWS_LISTED = 500


@dataclass(frozen=True)
class SharedPage:
    """The logged-out page of a share link: the published version's frozen document."""

    doc: Document
    expires_at: datetime | None

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def shared_page(link: ShareLink) -> SharedPage | None:
    """What an open link shows; None when its incident has no published version (the link
    then answers like any other refusal). `link` comes with its incident and cluster."""
    postmortem = PostMortem.objects.filter(incident_id=link.incident_id).first()
    version = latest_published(postmortem) if postmortem else None
    if version is None:
        return None
    doc = document(link.incident, postmortem, version, evidence=link.include_evidence, shared=True)
    return SharedPage(doc=doc, expires_at=link.expires_at)


def postmortem_document(incident: Incident, *, evidence: bool = False) -> Document | None:
    """The post-mortem as it stands (the print page, the Markdown export), or None if none
    has been written."""
    postmortem = PostMortem.objects.filter(incident=incident).select_related("written_by").first()
    return document(incident, postmortem, evidence=evidence) if postmortem else None


@dataclass(frozen=True)
class ShareLinksPage:
    """An incident's share links with their view counts (and, for responders, who manage
    them, each view), the version a new link would show, the form and a link just made."""

    incident: Incident
    postmortem: PostMortem | None
    published: PostMortemVersion | None
    links: list[ShareLink]  # each with `view_count`
    views_listed: int
    can_share: bool
    form: Form | None
    created: dict | None  # {"link", "url"}: the token is shown in this answer only

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def share_links_page(
    incident: Incident, *, can_share: bool, form: Form | None = None, created: dict | None = None
) -> ShareLinksPage:
    """A fixed number of queries whatever the number of links and views."""
    postmortem = PostMortem.objects.filter(incident=incident).first()
    return ShareLinksPage(
        incident=incident,
        postmortem=postmortem,
        published=latest_published(postmortem) if postmortem else None,
        links=_links(incident, with_views=can_share),
        views_listed=VIEWS_LISTED,
        can_share=can_share,
        form=form,
        created=created,
    )


def _links(incident: Incident, *, with_views: bool) -> list[ShareLink]:
    """The links with their view counts; each view (when, address, user agent: outside
    readers' data) only for responders, who manage the links."""
    links = incident.share_links.select_related("created_by", "revoked_by").annotate(
        view_count=Count("views")
    )
    if with_views:
        links = links.prefetch_related(
            Prefetch("views", queryset=ShareView.objects.order_by("-at", "-pk"))
        )
    return list(links)
