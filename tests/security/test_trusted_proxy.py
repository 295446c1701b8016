"""Behind a proxy everyone was one address (a medium finding): the client address every
per-client control uses comes through trusted proxies only (core/clients.py). Tried through a
real nginx on loopback with the configuration docs/operations.md gives; each loopback address
a client connects from is one client as nginx sees it."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from core.clients import client_ip
from core.models import LoginFailure
from tests.security.proxy import NGINX, Client, nginx

needs_nginx = pytest.mark.skipif(
    not NGINX.exists(), reason="needs Debian's nginx (/usr/sbin/nginx): scripts/system-packages"
)


@pytest.fixture
def proxy(live_server, settings, tmp_path):
    settings.TRUSTED_PROXIES = ["127.0.0.1/32"]  # nginx connects to the console from here
    with nginx(tmp_path / "nginx", live_server.url) as url:
        yield url


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_failed_logins_from_one_client_behind_the_proxy_lock_only_that_client(proxy, bob):
    attacker = Client(proxy, "127.0.0.5")
    statuses = [attacker.log_in(f"made-up-{attempt}", "wrong") for attempt in range(20)]
    assert statuses[:19] == [200] * 19 and statuses[19] == 429  # the 20th locks the address
    assert attacker.log_in("bob", "bob-password") == 429  # this address is locked
    assert Client(proxy, "127.0.0.6").log_in("bob", "bob-password") == 302  # bob is not
    assert set(LoginFailure.objects.values_list("ip", flat=True)) == {"127.0.0.5"}


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_a_forwarded_for_header_the_client_wrote_is_not_believed(proxy, bob):
    spoofer = Client(proxy, "127.0.0.5")
    spoofer.log_in("bob", "wrong", headers={"X-Forwarded-For": "127.0.0.9"})
    assert list(LoginFailure.objects.values_list("ip", flat=True)) == ["127.0.0.5"]


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_the_metrics_allowlist_sees_the_client_behind_the_proxy(proxy, settings):
    settings.METRICS_ALLOWED_NETWORKS = ["127.0.0.7/32"]
    assert Client(proxy, "127.0.0.7").request("/metrics")[0] == 200
    assert Client(proxy, "127.0.0.8").request("/metrics")[0] == 403


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_share_views_are_counted_and_logged_per_client_behind_the_proxy(proxy, settings):
    from sharing.models import ShareHit

    settings.SHARE_VIEW_LIMIT = 3
    busy = Client(proxy, "127.0.0.5")
    assert [busy.request("/s/" + "x" * 43 + "/")[0] for _ in range(4)] == [404, 404, 404, 429]
    assert Client(proxy, "127.0.0.6").request("/s/" + "x" * 43 + "/")[0] == 404  # not 429
    assert set(ShareHit.objects.values_list("ip", flat=True)) == {"127.0.0.5", "127.0.0.6"}


def _request(remote: str, forwarded: str | None = None):
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    return RequestFactory().get("/", REMOTE_ADDR=remote, **extra)


def test_without_trusted_proxies_the_header_is_ignored(settings):
    settings.TRUSTED_PROXIES = []
    assert client_ip(_request("203.0.113.9", "198.51.100.1")) == "203.0.113.9"


def test_the_header_is_read_from_the_right_through_every_trusted_hop(settings):
    settings.TRUSTED_PROXIES = ["10.0.5.0/24", "192.0.2.1"]
    # client (what it claims), client, load balancer, nginx
    request = _request("10.0.5.2", "1.1.1.1, 198.51.100.7, 192.0.2.1")
    assert client_ip(request) == "198.51.100.7"
    assert client_ip(_request("203.0.113.9", "198.51.100.1")) == "203.0.113.9"  # not a proxy
    assert client_ip(_request("10.0.5.2", "not-an-address")) == "10.0.5.2"
    assert client_ip(_request("10.0.5.2", "[2001:db8::7]:4431")) == "2001:db8::7"
    assert client_ip(_request("10.0.5.2", "198.51.100.7:5555")) == "198.51.100.7"
    assert client_ip(_request("10.0.5.2", "")) == "10.0.5.2"


def test_bad_proxy_settings_stop_start_up(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from console.settings.base import env_networks

    monkeypatch.setenv("HANGDESK_TRUSTED_PROXIES", "127.0.0.1, nginx.local")
    with pytest.raises(ImproperlyConfigured, match="HANGDESK_TRUSTED_PROXIES"):
        env_networks("HANGDESK_TRUSTED_PROXIES")
