"""What in an HTML page could run or reach out: read with the standard library's parser, the
way a browser tokenizes tags, so escaped text (`&lt;script&gt;`) never counts as a tag."""

from __future__ import annotations

from html.parser import HTMLParser

URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "poster", "data"}
BAD_SCHEMES = ("javascript:", "vbscript:", "data:")
EMBEDDING = {"iframe", "object", "embed", "frame", "base", "meta", "link", "img", "svg"}


class _Finder(HTMLParser):
    def __init__(self, allowed_scripts: tuple[str, ...]):
        super().__init__(convert_charrefs=True)
        self.allowed_scripts = allowed_scripts
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name in URL_ATTRIBUTES and value:
                squeezed = "".join(value.split()).lower()
                if squeezed.startswith(BAD_SCHEMES):
                    self.found.append(f"<{tag} {name}={value!r}>")
            if name == "style":
                self.found.append(f"<{tag} style=...>")
        if tag == "script":
            src = attributes.get("src") or ""
            data = attributes.get("type") == "application/json" and not src
            if not data and not src.startswith(self.allowed_scripts):
                self.found.append(f"<script src={src!r}>")
        elif tag in EMBEDDING:
            self.found.append(f"<{tag}>")


def active_parts(html: str, *, allowed_scripts: tuple[str, ...] = ("/static/",)) -> list[str]:
    """Every tag or attribute that could run code or load something: scripts other than the
    console's own static files, event handlers, javascript:/data: URLs, styles, embeds."""
    finder = _Finder(allowed_scripts)
    finder.feed(html)
    finder.close()
    return finder.found


def body_of(html: str) -> str:
    """The part of a page under <body>: the head's own stylesheet and meta tags are the
    page's, not content."""
    start = html.find("<body")
    return html[start:] if start >= 0 else html
