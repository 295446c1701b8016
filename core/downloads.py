"""Content-Disposition for names that came from a node or a user: control characters (a CR/LF
would make the header invalid, and Django answer 500) and path separators become `_`, and a
name that is not plain ASCII is sent as RFC 6266's `filename*` (UTF-8), so it keeps its name."""

from __future__ import annotations

import re

from django.utils.http import content_disposition_header

_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]")


def safe_filename(name: str, *, fallback: str = "download") -> str:
    cleaned = _UNSAFE.sub("_", name).strip().strip(".")[:200]
    return cleaned or fallback


def disposition(name: str, *, attachment: bool = True) -> str:
    return content_disposition_header(attachment, safe_filename(name))
