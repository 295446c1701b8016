"""Debian's nginx as a reverse proxy on loopback, started by the test with its own prefix,
config and port, and stopped by its pid; and an HTTP client that connects from a chosen
loopback address (each address one "client" as the proxy sees it)."""

from __future__ import annotations

import contextlib
import http.client
import http.cookiejar
import re
import socket
import subprocess
import time
import urllib.request
from functools import partial
from pathlib import Path

NGINX = Path("/usr/sbin/nginx")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def documented_location(upstream: str) -> str:
    """The `location / { ... }` block docs/operations.md gives for nginx, aimed at `upstream`."""
    text = DOCS.read_text()
    block = re.search(r"```nginx\n(location / \{.*?\n\})\n```", text, re.S)
    assert block, "docs/operations.md lost its nginx block"
    return block.group(1).replace("http://127.0.0.1:8000", upstream)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def nginx(prefix: Path, upstream: str):
    """nginx in front of `upstream`; yields its base URL."""
    port = free_port()
    for folder in ("logs", "tmp"):
        (prefix / folder).mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(f"""
master_process off;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        {documented_location(upstream)}
    }}
}}
""")
    process = subprocess.Popen(
        [str(NGINX), "-p", str(prefix), "-c", str(conf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_listening(port, process, prefix)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()  # by its pid: nginx's own process, nobody else's
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_listening(port: int, process: subprocess.Popen, prefix: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited: {process.stderr.read().decode()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nginx did not listen: {(prefix / 'logs/error.log').read_text()[-2000:]}")


class _FromAddress(urllib.request.HTTPHandler):
    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def http_open(self, req):
        connection = partial(http.client.HTTPConnection, source_address=(self.source, 0))
        return self.do_open(connection, req)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Client:
    """A browser-ish client (cookies, no redirects followed) connecting from `source`."""

    def __init__(self, base: str, source: str) -> None:
        self.base = base
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            _FromAddress(source), _NoRedirects, urllib.request.HTTPCookieProcessor(self.cookies),
            urllib.request.ProxyHandler({}),
        )  # fmt: skip

    def request(self, path: str, data: dict | None = None, headers: dict | None = None):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        url = self.base + path  # http://127.0.0.1:<nginx>/...
        request = urllib.request.Request(url, data=body, headers=headers or {})  # noqa: S310
        try:
            with self.opener.open(request, timeout=20) as response:
                return response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def csrf(self) -> str:
        return next(c.value for c in self.cookies if c.name == "csrftoken")

    def log_in(self, username: str, password: str, headers: dict | None = None) -> int:
        self.request("/login/")
        status, _ = self.request(
            "/login/",
            {"username": username, "password": password, "csrfmiddlewaretoken": self.csrf()},
            headers={"Referer": self.base + "/login/", **(headers or {})},
        )
        return status
