"""The egress policy (core/egress.py): what a webhook, a pager, a metrics store and an SSH
target may reach, numeric forms, every resolved address, DNS rebinding, delivery errors as
classes. Webhook SSRF was the review's first medium finding."""

from __future__ import annotations

import socket
import time

import pytest
from django.core.exceptions import ValidationError

from core import egress
from tests.security.servers import LineServer, TlsServer, make_ca_and_cert
from tests.watch.receiver import Receiver
from watch.webhooks import post_json, validate_webhook_url

REFUSED_FOR_WEBHOOKS = [
    "http://127.0.0.1:6379/",  # Redis
    "http://127.0.0.1:5432/",  # PostgreSQL
    "http://localhost:8000/admin/",
    "http://LOCALHOST./x",
    "http://api.localhost/x",
    "http://[::1]:6379/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
    "http://[::ffff:7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of the metadata address
    "http://[2002:7f00:1::]/",  # 6to4 of loopback
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[fe80::1]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/",
    "http://2130706433/",  # decimal 127.0.0.1
    "http://0177.0.0.1/",  # octal
    "http://0x7f.0.0.1/",  # hex
    "http://0x7f000001/",
    "http://127.1/",  # short form
    "http://017700000001/",
    "http://10.0.0.5/",
    "http://172.16.3.4/",
    "http://192.168.1.1/",
    "http://[fd12:3456::1]/",  # unique local
    "http://100.64.0.1/",  # CGNAT
    "http://224.0.0.1/",
    "http://0.0.0.0:8000/",
    "http://0/",
    "http://255.255.255.255/",
    "http://192.0.2.10/",  # documentation
    "http://127%2e0%2e0%2e1/",  # a host that changes once unquoted
    "http://%00x/",
    "http://x%0d%0a/",
]


@pytest.fixture
def default_policy(settings):
    """The policy as shipped: the suite's loopback allowance taken away."""
    settings.EGRESS_ALLOW = []
    settings.EGRESS_DENY = []
    settings.WATCH_WEBHOOK_HOSTS = []
    return settings


@pytest.fixture
def resolver(monkeypatch):
    """A resolver stand-in: `answers[name]` is a list of answers, one per lookup (the last one
    repeats); every lookup is recorded."""

    class Resolver:
        answers: dict[str, list[list[str]]] = {}
        lookups: list[str] = []

    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in Resolver.answers:
            return real(host, port, *args, **kwargs)
        Resolver.lookups.append(host)
        queue = Resolver.answers[host]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
             (a, port) if ":" not in a else (a, port, 0, 0))
            for a in addresses
        ]  # fmt: skip

    Resolver.answers, Resolver.lookups = {}, []
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return Resolver


@pytest.mark.parametrize("url", REFUSED_FOR_WEBHOOKS)
def test_a_webhook_url_aimed_inside_is_refused_when_saved(default_policy, url):
    with pytest.raises(ValidationError) as refused:
        validate_webhook_url(url)
    assert "refused by policy" in str(refused.value) or "not a usable URL" in str(refused.value)


def test_public_destinations_pass(default_policy):
    validate_webhook_url("https://hooks.slack.com/services/T000/B000/XXXX")  # no DNS here
    validate_webhook_url("https://8.8.8.8/hook")
    validate_webhook_url("https://[2606:4700::1111]/hook")
    validate_webhook_url("https://[::ffff:8.8.8.8]/hook")  # a mapped public address


def test_every_address_a_name_resolves_to_is_checked(default_policy, resolver):
    resolver.answers["hooks.evil.example"] = [["8.8.8.8", "10.0.0.5"]]
    with pytest.raises(ValidationError, match=r"resolves to 10\.0\.0\.5, a private address"):
        validate_webhook_url("https://hooks.evil.example/x")
    resolver.answers["meta.evil.example"] = [["169.254.169.254"]]
    with pytest.raises(egress.EgressRefused, match="link-local"):
        egress.check_destination("meta.evil.example", 80, purpose="pager")


def test_ssh_reaches_private_and_loopback_but_never_link_local(default_policy):
    for host in ("10.1.2.3", "127.0.0.1", "192.168.0.9", "fd00::5", "localhost"):
        assert egress.check_destination(host, 22, purpose="ssh")
    never = ("169.254.169.254", "fe80::1", "0.0.0.0", "224.0.0.5", "ff02::1", "metadata")  # noqa: S104
    for host in never:
        with pytest.raises(egress.EgressRefused):
            egress.check_destination(host, 22, purpose="ssh")


def test_the_operators_allow_and_deny_rules(default_policy, resolver):
    default_policy.EGRESS_ALLOW = ["10.20.0.0/16", "pager.corp", ".hooks.corp"]
    default_policy.EGRESS_DENY = ["10.20.9.0/24", "bad.hooks.corp"]
    resolver.answers["pager.corp"] = [["10.99.0.1"]]
    resolver.answers["a.hooks.corp"] = [["192.168.7.7"]]
    assert egress.check_destination("10.20.1.1", 443, purpose="webhook")
    assert egress.check_destination("pager.corp", 443, purpose="pager")  # the name is allowed
    assert egress.check_destination("a.hooks.corp", 443, purpose="webhook")
    for host, purpose in [("10.20.9.9", "webhook"), ("bad.hooks.corp", "webhook"),
                          ("10.20.9.9", "ssh"), ("10.30.0.1", "metrics")]:  # fmt: skip
        with pytest.raises(egress.EgressRefused):
            egress.check_destination(host, 443, purpose=purpose)
    default_policy.EGRESS_ALLOW = ["0.0.0.0/0"]
    with pytest.raises(egress.EgressRefused, match="unspecified"):
        egress.check_destination("0.0.0.0", 80, purpose="webhook")  # noqa: S104


def test_the_old_webhook_hosts_setting_still_limits_webhooks(default_policy):
    default_policy.WATCH_WEBHOOK_HOSTS = ["hooks.slack.com", ".corp.example", "127.0.0.1/32"]
    validate_webhook_url("https://hooks.slack.com/services/x")
    validate_webhook_url("http://127.0.0.1:8080/hook")  # listed: permitted though loopback
    for url in ("https://corp.example.evil.com/x", "https://8.8.8.8/x", "http://127.0.0.2/"):
        with pytest.raises(ValidationError):
            validate_webhook_url(url)


def test_bad_rules_in_the_environment_stop_the_settings(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from console.settings.base import env_egress_rules

    monkeypatch.setenv("HANGDESK_EGRESS_ALLOW", "10.0.0.0/8, hooks corp")
    with pytest.raises(ImproperlyConfigured, match="HANGDESK_EGRESS_ALLOW"):
        env_egress_rules("HANGDESK_EGRESS_ALLOW")


def test_a_rebinding_name_is_connected_to_the_checked_address(settings, resolver):
    settings.EGRESS_ALLOW = ["127.0.0.1/32"]  # 127.0.0.2 is refused
    with Receiver() as checked:
        port = checked.server.server_address[1]
        with LineServer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", host="127.0.0.2",
                        port=port) as rebound:  # fmt: skip
            resolver.answers["rebind.test"] = [["127.0.0.1"], ["127.0.0.2"]]
            delivery = post_json(f"http://rebind.test:{port}/hook", {"text": "x"}, timeout_s=5)
    assert delivery.ok and len(checked.posts) == 1 and rebound.accepted == 0
    assert resolver.lookups == ["rebind.test"]  # resolved once: the check's answer was used


def test_the_refused_address_is_never_connected_to(default_policy, resolver):
    with LineServer(b"HTTP/1.1 200 OK\r\n\r\n") as server:
        resolver.answers["inside.test"] = [["127.0.0.1"]]
        delivery = post_json(f"http://inside.test:{server.port}/", {}, timeout_s=2)
        assert delivery.detail == "refused by policy" and server.accepted == 0


@pytest.mark.parametrize(
    ("answer", "drip", "kind"),
    [
        (b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", False, "not HTTP"),
        (b"-ERR unknown command 'POST', with args beginning with: '/'\r\n", False, "not HTTP"),
        (b"", False, "timed out"),  # accepts, never answers
        (b"H", True, "timed out"),  # answers a byte every 0.2 s, forever
    ],
)
def test_a_receiver_that_is_no_http_server_is_a_class_of_failure(answer, drip, kind):
    with LineServer(answer, drip=drip) as server:
        started = time.monotonic()
        delivery = post_json(f"http://127.0.0.1:{server.port}/", {}, timeout_s=1.0)
        elapsed = time.monotonic() - started
    assert not delivery.ok and delivery.detail == kind
    assert elapsed < 4  # the whole exchange is bounded, a drip included


def test_https_is_verified_against_the_urls_host_name(settings, resolver, tmp_path):
    ca, cert, key = make_ca_and_cert(tmp_path, "hooks.test")
    resolver.answers["hooks.test"] = [["127.0.0.1"]]
    resolver.answers["other.test"] = [["127.0.0.1"]]
    with TlsServer(cert, key) as server:
        untrusted = post_json(f"https://hooks.test:{server.port}/", {}, timeout_s=5)
        settings.EGRESS_CA_FILE = str(ca)
        trusted = post_json(f"https://hooks.test:{server.port}/", {}, timeout_s=5)
        wrong_name = post_json(f"https://other.test:{server.port}/", {}, timeout_s=5)
    assert untrusted.detail == "TLS" and wrong_name.detail == "TLS"
    assert trusted.ok and "hooks.test" in server.server_names, server.errors  # SNI set


def test_https_to_a_plain_http_server_is_a_tls_failure():
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        delivery = post_json(f"https://127.0.0.1:{port}/hook", {}, timeout_s=3)
    assert delivery.detail == "TLS" and not receiver.posts


def test_connect_gives_a_socket_to_a_checked_address():
    with (
        LineServer(b"hello") as server,
        egress.connect("127.0.0.1", server.port, purpose="ssh", timeout=2) as sock,
    ):
        assert sock.getpeername()[0] == "127.0.0.1" and sock.recv(5) == b"hello"


def test_an_unknown_purpose_is_a_programming_error():
    with pytest.raises(ValueError):
        egress.check_destination("127.0.0.1", 80, purpose="anything")
