"""Markdown that responders write, rendered to HTML nobody can inject into.

Two locks: markdown-it-py parses with raw HTML off (`<script>` stays text) and refuses
`javascript:`/`vbscript:`/`data:` link targets; then nh3 (the ammonia sanitizer) keeps only
the tags and attributes listed here and the http, https and mailto schemes, so whatever the
parser let through, the browser gets no script, no handler, no style and no remote image.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

# Longer text is cut before parsing (the forms refuse it earlier; this bounds the renderer).
MAX_MARKDOWN_CHARS = 200_000

_PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_PARSER.enable(["table", "strikethrough"])

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6",
        "strong", "em", "del", "s", "code", "pre", "blockquote",
        "ul", "ol", "li", "a",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def render_markdown(text: str) -> SafeString:
    """`text` (Markdown written by a person, or quoting logs) as sanitized HTML."""
    html = _PARSER.render((text or "")[:MAX_MARKDOWN_CHARS])
    clean = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return mark_safe(clean)  # noqa: S308 - sanitized by nh3 just above
