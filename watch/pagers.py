"""On-call pagers beside the Slack-compatible webhook: PagerDuty (Events API v2) and Opsgenie
(Alert API), what each is sent and one bounded request through the egress policy (purpose
"pager": the keys and the endpoints are a user's choice).

PagerDuty: POST {PAGERDUTY_EVENTS_URL} (https://events.pagerduty.com/v2/enqueue) with
`routing_key`, `event_action` "trigger" or "resolve", and a `dedup_key` per incident, so a
raise that repeats updates one alert and the incident's resolution resolves it; a trigger
carries `payload` (`summary` ≤ 1024 characters, `source`, `severity`, `timestamp`,
`component`, `group`, `class`, `custom_details`), `links`, `client` and `client_url`.
Opsgenie: POST {OPSGENIE_API_URL}/v2/alerts with `Authorization: GenieKey <key>` and
`message` (≤ 130), `alias` (≤ 512: the same per-incident key), `description` (≤ 15,000),
`details`, `entity`, `source`, `priority`, `tags`; its resolution is
POST /v2/alerts/<alias>/close?identifierType=alias. Both answer 202 when they took it.

Evidence in a page is a node's text: it travels as JSON values (never markup), cut to the
documented lengths. The keys are secrets: they are never logged or shown back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings

from core import egress

from .webhooks import Delivery

PAGERDUTY = "pagerduty"
OPSGENIE = "opsgenie"
SEVERITY = {"SEV1": ("critical", "P1"), "SEV2": ("error", "P2"), "SEV3": ("warning", "P3")}


@dataclass(frozen=True)
class Page:
    """What a page says of one incident, whichever pager takes it."""

    dedup_key: str  # one per incident: PagerDuty's dedup_key, Opsgenie's alias
    summary: str
    cluster: str
    severity: str  # SEV1 / SEV2 / SEV3
    incident_ref: str
    incident_url: str
    classification: str | None = None
    suspect_ranks: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()


def dedup_key(incident_pk: int) -> str:
    """Stable per incident and per console (two consoles paging one service do not merge)."""
    return f"hangdesk:{settings.HANGDESK_BASE_URL.split('://', 1)[-1]}:incident:{incident_pk}"[:255]


def _details(page: Page) -> dict:
    return {
        "incident": page.incident_ref,
        "cluster": page.cluster,
        "classification": page.classification,
        "suspect_ranks": list(page.suspect_ranks[:64]),
        "suspect_nodes": list(page.suspect_nodes[:16]),
        "console": page.incident_url,
    }


def pagerduty_trigger(routing_key: str, page: Page, *, at: str) -> dict:
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": page.dedup_key,
        "payload": {
            "summary": page.summary[:1024],
            "source": page.cluster[:255] or "hangdesk",
            "severity": SEVERITY.get(page.severity, ("error", "P2"))[0],
            "timestamp": at,
            "component": "training job",
            "group": page.cluster[:255],
            "class": page.classification or "unknown",
            "custom_details": _details(page),
        },
        "links": [{"href": page.incident_url, "text": f"{page.incident_ref} in hangdesk"}],
        "client": "hangdesk",
        "client_url": page.incident_url,
    }


def pagerduty_resolve(routing_key: str, key: str) -> dict:
    return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": key}


def opsgenie_create(page: Page) -> dict:
    return {
        "message": page.summary[:130],
        "alias": page.dedup_key[:512],
        "description": f"{page.summary}\n\n{page.incident_url}"[:15000],
        "details": {k: json.dumps(v) if not isinstance(v, str) else v
                    for k, v in _details(page).items() if v is not None},
        "entity": page.cluster[:512],
        "source": "hangdesk",
        "priority": SEVERITY.get(page.severity, ("error", "P2"))[1],
        "tags": ["hangdesk", f"class:{page.classification or 'unknown'}"],
    }  # fmt: skip


def _post(url: str, body: dict, headers: dict[str, str]) -> Delivery:
    try:
        result = egress.http_request(
            "POST", url, purpose="pager", body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **headers},
            timeout=settings.WATCH_WEBHOOK_TIMEOUT_S, max_response_bytes=4096,
        )  # fmt: skip
    except egress.DeliveryError as exc:
        return Delivery(False, exc.kind)
    return Delivery(200 <= result.status < 300, f"HTTP {result.status}")


def send_trigger(pager: str, key: str, page: Page, *, at: str) -> Delivery:
    if pager == PAGERDUTY:
        return _post(settings.PAGERDUTY_EVENTS_URL, pagerduty_trigger(key, page, at=at), {})
    url = settings.OPSGENIE_API_URL.rstrip("/") + "/v2/alerts"
    return _post(url, opsgenie_create(page), {"Authorization": f"GenieKey {key}"})


def send_resolve(pager: str, key: str, page_key: str, *, note: str) -> Delivery:
    if pager == PAGERDUTY:
        return _post(settings.PAGERDUTY_EVENTS_URL, pagerduty_resolve(key, page_key), {})
    alias = quote(page_key, safe="")
    url = settings.OPSGENIE_API_URL.rstrip("/") + f"/v2/alerts/{alias}/close?identifierType=alias"
    body = {"source": "hangdesk", "note": note[:25000]}
    return _post(url, body, {"Authorization": f"GenieKey {key}"})
