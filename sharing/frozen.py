"""A published version's document, frozen: what the verdict, the evidence, the chart and the
notes were when the version was published, stored once (`PublishedDocument`) and read back
as it was. The shared page shows this; a snapshot taken after publishing, a note pinned or
unpinned, a decision changed later do not reach it.

Stored as JSON with a schema number; times as ISO strings, read back as datetimes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from incidents.models import PostMortemVersion

from .models import PublishedDocument

SCHEMA = 1
# The parts of a document that change after publishing unless frozen, and in them the
# fields that are times.
PARTS = ("verdict", "figure", "evidence", "decisions", "pinned")
_TIMES = {"verdict": ("at",), "decisions": ("at",), "pinned": ("at",)}


def frozen_parts(version: PostMortemVersion, build: Callable[[], dict[str, Any]]) -> dict:
    """The version's frozen parts; frozen now from `build()` (the document's live parts)
    when the version has none yet (a version published before freezing existed)."""
    stored = PublishedDocument.objects.filter(version=version).first()
    if stored is None:
        stored = freeze(version, build())
    return {**_thawed(stored.content), "frozen_at": stored.frozen_at}


def is_frozen(version: PostMortemVersion) -> bool:
    return PublishedDocument.objects.filter(version=version).exists()


def freeze(version: PostMortemVersion, parts: dict[str, Any]) -> PublishedDocument:
    """Store the parts for this version once; a second freeze keeps the first."""
    content = {"schema": SCHEMA, **{name: _jsonable(parts.get(name)) for name in PARTS}}
    try:
        with transaction.atomic():
            return PublishedDocument.objects.create(
                version=version, schema=SCHEMA, frozen_at=timezone.now(), content=content
            )
    except IntegrityError:  # frozen meanwhile (a second web process): that one stands
        return PublishedDocument.objects.get(version=version)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "to_json"):  # a typed part of the diagnosis: its stored form
        return _jsonable(value.to_json())
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return value


def _thawed(content: dict[str, Any]) -> dict[str, Any]:
    parts = {name: content.get(name) for name in PARTS}
    for name, fields in _TIMES.items():
        rows = parts[name]
        for row in [rows] if isinstance(rows, dict) else rows or []:
            for field in fields:
                if isinstance(row.get(field), str):
                    row[field] = parse_datetime(row[field])
    return parts
