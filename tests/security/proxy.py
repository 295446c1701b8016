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


def _listening_socket() -> socket.socket:
    """A port of our own from the start: bound here and handed to nginx, so no other process
    on the machine (a lab's sshd) can take it between choosing it and nginx listening."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


@contextlib.contextmanager
def nginx(prefix: Path, upstream: str):
    """nginx in front of `upstream`; yields its base URL."""
    sock = _listening_socket()
    port = sock.getsockname()[1]
    for folder in ("logs", "tmp"):
        (prefix / folder).mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(f"""
daemon off;
worker_processes 1;
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
    # nginx takes the socket as an inherited one (its NGINX variable, as in a binary upgrade;
    # that needs its master process) for the `listen` of the same address.
    with sock:
        process = subprocess.Popen(
            [str(NGINX), "-p", str(prefix), "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=[sock.fileno()],
            env={"NGINX": f"{sock.fileno()};"},
        )  # fmt: skip
    try:
        _wait_started(process, prefix)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()  # by its pid: nginx's own process, nobody else's
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_started(process: subprocess.Popen, prefix: Path) -> None:
    """Until nginx's master wrote its pid file: its configuration is read and it holds the
    socket (connections made before its worker accepts wait in the socket's backlog)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited: {process.stderr.read().decode()[-2000:]}")
        with contextlib.suppress(OSError, ValueError):
            if int((prefix / "nginx.pid").read_text()) == process.pid:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nginx did not start: {(prefix / 'logs/error.log').read_text()[-2000:]}")


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
