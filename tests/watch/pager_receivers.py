"""Local stand-ins for PagerDuty's Events API v2 and Opsgenie's Alert API on 127.0.0.1: each
checks a request against the documented shape and answers as the real one does (202 and its
body when the event is valid, 400 with the reasons otherwise), recording what it was sent."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

PD_KEYS = {"routing_key", "event_action", "dedup_key", "payload", "images", "links", "client",
           "client_url"}  # fmt: skip
PD_SEVERITIES = {"critical", "error", "warning", "info"}


def pagerduty_problems(path: str, headers, body) -> list[str]:
    problems = []
    if path != "/v2/enqueue":
        problems.append(f"path {path}")
    if headers.get("Content-Type") != "application/json":
        problems.append("Content-Type must be application/json")
    if not isinstance(body, dict):
        return [*problems, "body is not an object"]
    problems += [f"unknown field {k}" for k in set(body) - PD_KEYS]
    if not isinstance(body.get("routing_key"), str) or len(body["routing_key"]) != 32:
        problems.append("routing_key must be the 32-character integration key")
    action = body.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        problems.append(f"event_action {action!r}")
    key = body.get("dedup_key")
    if key is not None and (not isinstance(key, str) or len(key) > 255):
        problems.append("dedup_key must be a string of at most 255 characters")
    if action in ("acknowledge", "resolve") and not key:
        problems.append(f"{action} needs the dedup_key of the event it ends")
    if action == "trigger":
        problems += _trigger_problems(body)
    return problems


def _trigger_problems(body: dict) -> list[str]:
    problems = []
    payload = body.get("payload")
    if not isinstance(payload, dict):
        return ["trigger needs a payload"]
    summary = payload.get("summary")
    if not isinstance(summary, str) or not 0 < len(summary) <= 1024:
        problems.append("payload.summary: 1 to 1024 characters")
    if not isinstance(payload.get("source"), str) or not payload["source"]:
        problems.append("payload.source is required")
    if payload.get("severity") not in PD_SEVERITIES:
        problems.append(f"payload.severity {payload.get('severity')!r}")
    if "timestamp" in payload:
        try:
            datetime.fromisoformat(payload["timestamp"])
        except (TypeError, ValueError):
            problems.append("payload.timestamp is not ISO 8601")
    for link in body.get("links", []):
        if not isinstance(link, dict) or not isinstance(link.get("href"), str):
            problems.append("links need an href")
    return problems


def opsgenie_problems(path: str, query: dict, headers, body) -> list[str]:
    problems = []
    auth = headers.get("Authorization", "")
    if not auth.startswith("GenieKey ") or len(auth) <= len("GenieKey "):
        problems.append("Authorization must be 'GenieKey <api key>'")
    if path == "/v2/alerts":
        if not isinstance(body, dict):
            return [*problems, "body is not an object"]
        message = body.get("message")
        if not isinstance(message, str) or not 0 < len(message) <= 130:
            problems.append("message: 1 to 130 characters")
        if len(body.get("alias", "")) > 512:
            problems.append("alias: at most 512 characters")
        if len(body.get("description", "")) > 15000:
            problems.append("description: at most 15000 characters")
        if body.get("priority", "P3") not in ("P1", "P2", "P3", "P4", "P5"):
            problems.append(f"priority {body.get('priority')!r}")
        details = body.get("details", {})
        if not isinstance(details, dict) or not all(isinstance(v, str) for v in details.values()):
            problems.append("details: a map of strings")
        if not isinstance(body.get("tags", []), list):
            problems.append("tags: a list")
    elif path.startswith("/v2/alerts/") and path.endswith("/close"):
        if query.get("identifierType") != ["alias"]:
            problems.append("close by alias needs identifierType=alias")
    else:
        problems.append(f"path {path}")
    return problems


class PagerReceiver:
    """`kind`: "pagerduty" or "opsgenie"."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                if receiver.kind == "pagerduty":
                    problems = pagerduty_problems(parts.path, self.headers, body)
                else:
                    problems = opsgenie_problems(parts.path, query, self.headers, body)
                with receiver.lock:
                    receiver.requests.append(
                        {"path": unquote(parts.path), "query": query, "body": body,
                         "headers": dict(self.headers), "problems": problems}
                    )  # fmt: skip
                answer = receiver.answer(body, problems)
                data = json.dumps(answer).encode()
                self.send_response(400 if problems else 202)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, body, problems: list[str]) -> dict:
        if self.kind == "pagerduty":
            if problems:
                return {"status": "invalid event", "message": "Event object is invalid",
                        "errors": problems}  # fmt: skip
            return {"status": "success", "message": "Event processed",
                    "dedup_key": (body or {}).get("dedup_key")}  # fmt: skip
        if problems:
            return {"message": "; ".join(problems), "took": 0.001, "requestId": "test"}
        return {"result": "Request will be processed", "took": 0.002, "requestId": "test"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> PagerReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
