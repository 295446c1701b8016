"""The page a raise sends: a Slack-compatible JSON body (text + blocks), the rules a webhook
URL must meet, and one bounded POST.

A webhook URL is a user string the worker will connect to: http or https only, a host name or
address, no credentials in it, no redirects followed, and, when settings.WATCH_WEBHOOK_HOSTS
lists hosts, only those (exact names, or ".example.com" for a domain).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

MAX_URL = 500
_TEXT_CAP = 3000  # Slack's limit for a section's text


def validate_webhook_url(value: str) -> None:
    if not value:
        return
    if len(value) > MAX_URL or any(c in value for c in "\r\n\t \0"):
        raise ValidationError("A webhook URL is one line without spaces, at most 500 characters.")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"Not a usable URL: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise ValidationError("A webhook URL starts with https:// (or http://).")
    if not parts.hostname:
        raise ValidationError("A webhook URL names a host.")
    if parts.username or parts.password:
        raise ValidationError("Put no credentials in the URL's host part.")
    if port == 0:
        raise ValidationError("Port 0 is not a port.")
    allowed = [h.lower() for h in getattr(settings, "WATCH_WEBHOOK_HOSTS", [])]
    if allowed and not _host_allowed(parts.hostname.lower(), allowed):
        raise ValidationError(f"{parts.hostname} is not among the allowed webhook hosts.")


def _host_allowed(host: str, allowed: list[str]) -> bool:
    return any(host == a or (a.startswith(".") and host.endswith(a)) for a in allowed)


def page_body(
    *, cluster: str, reason: str, verdict: dict | None, incident_ref: str, incident_url: str
) -> dict:
    """The JSON body: `text` for clients that read only that, `blocks` for Slack."""
    if verdict:
        classification = verdict.get("classification") or "unknown"
        headline = f"{classification}: {verdict.get('summary') or ''}".strip()
        suspects = verdict.get("suspect_ranks") or []
        suspect_nodes = verdict.get("suspect_nodes") or []
    else:
        headline, suspects, suspect_nodes = "no verdict yet (the snapshots did not finish)", [], []
    suspect_text = _suspects(suspects, suspect_nodes)
    text = (
        f"hangdesk watch: {cluster} {reason}. {incident_ref}: {headline} "
        f"Suspects: {suspect_text}. {incident_url}"
    )[:_TEXT_CAP]
    return {
        "text": text,
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*{cluster}*: {reason} — <{incident_url}|{incident_ref}>"[:_TEXT_CAP],
                },
            },
            _section(f"*Verdict* {headline}"),
            _section(f"*Suspects* {suspect_text}"),
        ],
        "hangdesk": {
            "cluster": cluster,
            "reason": reason,
            "incident": incident_ref,
            "url": incident_url,
            "classification": (verdict or {}).get("classification"),
            "suspect_ranks": suspects[:64],
            "suspect_nodes": suspect_nodes[:16],
        },
    }


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:_TEXT_CAP]}}


def _suspects(ranks: list, nodes: list) -> str:
    if not ranks and not nodes:
        return "none named"
    shown = ", ".join(str(r) for r in ranks[:16]) + (" …" if len(ranks) > 16 else "")
    parts = [f"ranks {shown}"] if ranks else []
    if nodes:
        parts.append("on " + ", ".join(str(n) for n in nodes[:8]))
    return " ".join(parts)


@dataclass(frozen=True)
class Delivery:
    ok: bool
    detail: str  # "HTTP 200", or why it failed


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # a redirect is answered as the error it is, never followed


def post_json(url: str, body: dict, *, timeout_s: float) -> Delivery:
    """POST the body once; never raises for the receiver's failures."""
    try:
        validate_webhook_url(url)
    except ValidationError as exc:
        return Delivery(False, f"invalid URL: {'; '.join(exc.messages)}")
    data = json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - scheme checked above: http(s) only
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(_NoRedirects, urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as response:
            response.read(1024)
            return Delivery(200 <= response.status < 300, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        return Delivery(False, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return Delivery(False, f"{type(exc).__name__}: {reason}"[:300])
