"""`hangdesk upload`: one node's bundle to a console's incident, into its waiting snapshot.

POST /api/v1/incidents/<id>/uploads/ with the bundle as the body and `Authorization: Bearer
<token>` (the snapshot's upload token, or a responder's API token). A console that does not
answer or answers 5xx is asked again (three attempts, 2 s then 4 s apart): a crash handler
runs once. Refusals (4xx) are final and printed in one line.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from argparse import Namespace

EXIT_STORED = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
ATTEMPTS = 3
MAX_ANSWER = 64 * 1024


def incident_id(text: str) -> int | None:
    """`12`, `INC-12` or `inc-12`; None for anything else."""
    digits = text.strip().upper().removeprefix("INC-")
    return int(digits) if digits.isdecimal() and len(digits) <= 12 else None


def upload_url(base: str, incident: int) -> str:
    return base.rstrip("/") + f"/api/v1/incidents/{incident}/uploads/"


def send(url: str, token: str, data: bytes, *, timeout: float) -> tuple[int, dict]:
    """(HTTP status, the JSON answer) of one POST; OSError when the console is unreachable."""
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked by the caller
        url,
        data=data,
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/gzip",
            "User-Agent": "hangdesk-upload",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status, _json(response.read(MAX_ANSWER))
    except urllib.error.HTTPError as exc:
        return exc.code, _json(exc.read(MAX_ANSWER))


def _json(raw: bytes) -> dict:
    try:
        answer = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {"detail": raw[:300].decode("utf-8", "replace").strip()}
    return answer if isinstance(answer, dict) else {"detail": str(answer)[:300]}


def _why(answer: dict) -> str:
    """The console's reason, whichever field it is under ({"bundle": ...}, {"detail": ...})."""
    parts = []
    for key, value in answer.items():
        text = " ".join(value) if isinstance(value, list) else str(value)
        parts.append(text if key in ("detail", "bundle") else f"{key}: {text}")
    return "; ".join(parts)[:500] or "no reason given"


def upload_command(args: Namespace) -> int:
    number = incident_id(args.incident)
    problem = _usage_problem(args, number)
    if problem:
        print(f"hangdesk upload: {problem}", file=sys.stderr)
        return EXIT_USAGE
    data = sys.stdin.buffer.read() if args.file == "-" else _read(args.file)
    if data is None:
        return EXIT_USAGE
    url = upload_url(args.url, number)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            status, answer = send(url, args.token, data, timeout=args.timeout)
        except OSError as exc:  # refused, unreachable, timed out, TLS
            status, answer = None, {"detail": f"{args.url} unreachable: {exc}"}
        if status is not None and status < 500:
            break
        if attempt < ATTEMPTS:
            time.sleep(2**attempt)
    if status in (200, 201):
        print(f"hangdesk upload: {answer.get('message') or 'stored'}", file=sys.stderr)
        return EXIT_STORED
    shown = f"HTTP {status}: " if status else ""
    print(f"hangdesk upload: refused: {shown}{_why(answer)}", file=sys.stderr)
    return EXIT_REFUSED


def _usage_problem(args: Namespace, number: int | None) -> str:
    if number is None:
        return f"--incident {args.incident!r} is not an incident number (12 or INC-12)"
    if not args.url:
        return "the console's address: --url https://hangdesk.example (or HANGDESK_URL)"
    if urllib.parse.urlsplit(args.url).scheme not in ("http", "https"):
        return f"--url {args.url!r} is not an http:// or https:// address"
    if not args.token:
        return "a token: --token (or HANGDESK_TOKEN): the upload token the incident shows"
    return ""


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        print(f"hangdesk upload: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return None
