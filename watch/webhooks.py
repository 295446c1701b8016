"""The page a raise sends: a Slack-compatible JSON body (text + blocks), the rules a webhook
URL must meet, and one bounded POST.

A webhook URL is a user string the worker will connect to, so it passes the egress policy
(core/egress.py) twice: when it is saved (its form, and every address its host resolves to
here) and when it is used (resolved again, every address checked, the connection made to a
checked one). Evidence in the body is escaped for Slack's mrkdwn, so a frame or node name
cannot ping a channel or plant a link.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from core import egress

MAX_URL = 500
_TEXT_CAP = 3000  # Slack's limit for a section's text


def validate_webhook_url(value: str) -> None:
    if not value:
        return
    if len(value) > MAX_URL or any(c in value for c in "\r\n\t \0"):
        raise ValidationError("A webhook URL is one line without spaces, at most 500 characters.")
    try:
        egress.check_url(value, purpose="webhook")
    except egress.EgressRefused as exc:
        raise ValidationError(exc.reason) from None


def mrkdwn_escape(text: str) -> str:
    """Slack's three control characters as the entities Slack decodes: `<!channel>` and
    `<url|label>` in evidence arrive as text, not as a ping or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
    # Slack reads `text` and every section as mrkdwn: all that came from evidence or a user
    # is escaped; the incident's reference and URL are the console's own.
    shown_cluster, shown_reason = mrkdwn_escape(cluster), mrkdwn_escape(reason)
    shown_headline = mrkdwn_escape(headline)
    suspect_text = mrkdwn_escape(_suspects(suspects, suspect_nodes))
    text = (
        f"hangdesk watch: {shown_cluster} {shown_reason}. {incident_ref}: {shown_headline} "
        f"Suspects: {suspect_text}. {incident_url}"
    )[:_TEXT_CAP]
    link = f"<{incident_url}|{incident_ref}>"
    return {
        "text": text,
        "blocks": [
            _section(f"*{shown_cluster}*: {shown_reason} — {link}"),
            _section(f"*Verdict* {shown_headline}"),
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
    detail: str  # "HTTP 200", or the class of the failure (core.egress.KINDS)

    @property
    def retryable(self) -> bool:
        """A destination the policy refuses stays refused: no point asking again."""
        return not self.ok and self.detail != egress.REFUSED


def post_json(url: str, body: dict, *, timeout_s: float) -> Delivery:
    """POST the body once through the egress policy; never raises for the receiver's failures.
    `detail` is "HTTP <status>" or the failure's class ("refused by policy", "unreachable",
    "timed out", "not HTTP", "TLS"), never the socket's own error: responders and viewers
    read it on the panel and the timeline."""
    if len(url) > MAX_URL:
        return Delivery(False, egress.REFUSED)
    try:
        result = egress.http_request(
            "POST", url, purpose="webhook", body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}, timeout=timeout_s,
            max_response_bytes=1024,
        )  # fmt: skip
    except egress.DeliveryError as exc:
        return Delivery(False, exc.kind)
    return Delivery(200 <= result.status < 300, f"HTTP {result.status}")
