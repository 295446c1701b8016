"""Who a request came from, the one answer every per-client control uses: the login
throttle, the share links' rate limit and view log, the /metrics allowlist, the audit log.

Behind a reverse proxy every request arrives from the proxy's address. `X-Forwarded-For` is
believed only when REMOTE_ADDR is one of settings.TRUSTED_PROXIES (HANGDESK_TRUSTED_PROXIES:
addresses or CIDRs), and then read from the right: each hop a trusted proxy appended is
skipped, and the first address that is not a trusted proxy is the client. Whatever a client
writes into the header itself sits left of that and is never reached. With no trusted
proxies (the default) the header is ignored.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings

_CACHE = "_hangdesk_client_ip"


@lru_cache(maxsize=8)
def parse_networks(
    entries: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Addresses or CIDRs; ValueError names the first that is neither."""
    networks = []
    for entry in (e.strip() for e in entries):
        if entry:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                raise ValueError(f"{entry!r} is neither an address nor a CIDR") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("["):  # [v6]:port
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    return address.ipv4_mapped or address if address.version == 6 else address


def _trusted(address, networks) -> bool:
    return any(address.version == n.version and address in n for n in networks)


def client_ip(request) -> str | None:
    """The client's address as a string (None when the request has none)."""
    cached = getattr(request, _CACHE, False)
    if cached is not False:
        return cached
    answer = _client_ip(request.META)
    setattr(request, _CACHE, answer)
    return answer


def _client_ip(meta) -> str | None:
    address = _address(meta.get("REMOTE_ADDR") or "")
    if address is None:
        return None
    networks = parse_networks(tuple(getattr(settings, "TRUSTED_PROXIES", ())))
    forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
    if networks and forwarded:
        for hop in reversed(forwarded.split(",")[-32:]):
            if not _trusted(address, networks):
                break
            previous = _address(hop)
            if previous is None:  # a hop we cannot read: the last proxy's word is all we have
                break
            address = previous
    return str(address)
