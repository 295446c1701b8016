"""One egress policy for every outbound connection a user can aim: webhooks, pagers, a
metrics store, a Slurm controller or a Ray head (docs/security.md, "Egress").

A destination is a user string. Before any byte leaves, its host is normalised (numeric forms
such as `2130706433`, `0177.1`, `0x7f.0.0.1` and IPv4-mapped IPv6 become the address they
mean), resolved, and *every* address it resolves to is checked; `connect` then connects to one
of those checked addresses, never resolving again, so a name that answers a public address to
the check and a private one to the connection (DNS rebinding) cannot pass.

Defaults: "webhook", "pager" and "metrics" reach public addresses only; "ssh" (nodes, Slurm
controllers, Ray heads: clusters are internal) may also reach loopback, private and CGNAT
addresses. Nothing reaches link-local (cloud metadata), multicast, unspecified or broadcast
addresses unless the operator permits them. The operator's rules (settings, from the
environment): EGRESS_DENY, always refused and checked first; EGRESS_ALLOW, permitted for any
purpose (CIDRs, host names, `.domain` suffixes). The unspecified address is never reachable.

Failures come back as a class a responder may see (`DeliveryError.kind`), never the raw socket
error, so a delivery status cannot be read as a port scan.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import logging
import re
import socket
import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from urllib.parse import urlsplit

from django.conf import settings

from .errors import Invalid

log = logging.getLogger(__name__)

Address = IPv4Address | IPv6Address
PURPOSES = ("webhook", "pager", "metrics", "ssh")

REFUSED = "refused by policy"
UNREACHABLE = "unreachable"
TIMED_OUT = "timed out"
NOT_HTTP = "not HTTP"
TLS = "TLS"
KINDS = (REFUSED, UNREACHABLE, TIMED_OUT, NOT_HTTP, TLS)


class DeliveryError(Exception):
    """An outbound request that did not get an answer. `kind` (one of KINDS) is what a person
    may be shown; `detail` is the raw reason, for the worker's log only."""

    kind: str = UNREACHABLE

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


class EgressRefused(Invalid, DeliveryError):
    """The policy refuses the destination; `reason` names the rule. An Invalid, so the API
    answers 400 and pages show the reason."""

    kind = REFUSED

    def __init__(self, reason: str, *, field: str | None = None) -> None:
        Invalid.__init__(self, reason, field=field)  # DeliveryError's __init__ runs too
        self.kind, self.reason, self.detail = REFUSED, reason, reason


# --- the address table -----------------------------------------------------------------------

_V4 = [  # (network, category); the first that contains an address names it
    ("255.255.255.255/32", "broadcast"),
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "CGNAT"),
    ("169.254.0.0/16", "link-local"),
    ("224.0.0.0/4", "multicast"),
    ("192.0.2.0/24", "documentation"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("198.18.0.0/15", "benchmarking"),
    ("192.0.0.0/24", "reserved"),
    ("240.0.0.0/4", "reserved"),
]
_V6 = [
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private"),  # site-local, deprecated
    ("fc00::/7", "private"),  # unique local (ULA)
    ("64:ff9b:1::/48", "private"),  # local-use NAT64
    ("ff00::/8", "multicast"),
    ("2001:db8::/32", "documentation"),
    ("100::/64", "reserved"),  # discard-only
    ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo among them
    ("::/8", "reserved"),  # IPv4-compatible and other embedded forms not unwrapped below
]
_TABLE = [(ipaddress.ip_network(net), category) for net, category in _V4 + _V6]
_NAT64 = IPv6Network("64:ff9b::/96")

# What each purpose may reach beyond public addresses (before the operator's rules).
_REACHABLE = {
    "webhook": frozenset(),
    "pager": frozenset(),
    "metrics": frozenset(),
    "ssh": frozenset({"loopback", "private", "CGNAT"}),
}
# Names that mean an address class whatever a resolver says: RFC 6761's localhost, and the
# cloud metadata services' names (they answer on link-local addresses).
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_METADATA_NAMES = (
    "metadata", "metadata.google.internal", "metadata.goog", "instance-data",
    "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com",
)  # fmt: skip
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def category(address: Address) -> str | None:
    """The special class an address falls in ("loopback", "private", ...), None if public.
    Addresses that embed an IPv4 address (IPv4-mapped, NAT64, 6to4) are judged by it too."""
    embedded = _embedded_v4(address)
    if embedded:  # the IPv4 address it carries decides (a mapped public address is public)
        return next((c for c in map(category, embedded) if c), None)
    for network, name in _TABLE:
        if address.version == network.version and address in network:
            return name
    return None


def _embedded_v4(address: Address) -> list[IPv4Address]:
    if address.version == 4:
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address in _NAT64:
        found.append(IPv4Address(int(address) & 0xFFFFFFFF))
    return found


# --- host names and numeric forms ----------------------------------------------------------


def normalise_host(host: str) -> str:
    """The host as the policy sees it: lower case, no brackets, no trailing dot, IDNA (ASCII).
    Refuses anything that is neither an address nor a DNS name (percent signs, spaces, ...)."""
    name = (host or "").strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    name = name.rstrip(".").lower()
    if ":" in name:
        try:
            address = IPv6Address(name)
        except ValueError:
            raise EgressRefused(f"refused by policy: {host!r} is not a host name") from None
        if address.scope_id:
            raise EgressRefused(f"refused by policy: {host!r} names an interface scope")
        return str(address)
    try:
        ascii_name = name.encode("idna").decode("ascii")
    except (UnicodeError, ValueError):
        raise EgressRefused(f"refused by policy: {host!r} is not a host name") from None
    labels = ascii_name.split(".")
    if not ascii_name or len(ascii_name) > 253 or not all(_LABEL.fullmatch(x) for x in labels):
        raise EgressRefused(f"refused by policy: {host!r} is not a host name")
    return ascii_name


def parse_address(host: str) -> Address | None:
    """The address a normalised host spells, in any numeric form the C resolver accepts
    (inet_aton: 1 to 4 parts, each decimal, 0-prefixed octal or 0x hex), else None."""
    if ":" in host:
        return IPv6Address(host)
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_numeric_part(p) is not None for p in parts):
        return None
    values = [_numeric_part(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        raise EgressRefused(f"refused by policy: {host!r} is not a valid address")
    number = 0
    for value in head:
        number = number * 256 + value
    return IPv4Address((number << (8 * (5 - len(values)))) + last)


def _numeric_part(part: str) -> int | None:
    try:
        if part[:2] in ("0x", "0X"):
            return int(part[2:] or "0", 16)
        if len(part) > 1 and part.startswith("0"):
            return int(part[1:], 8)
        return int(part, 10) if part.isdigit() else None
    except ValueError:
        return None


# --- the operator's rules --------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    networks: tuple[IPv4Network | IPv6Network, ...] = ()
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".corp.example"

    def has_name(self, host: str) -> bool:
        return host in self.names or any(host.endswith(s) for s in self.suffixes)

    def has_address(self, address: Address) -> bool:
        candidates = [address, *_embedded_v4(address)]
        return any(a.version == n.version and a in n for a in candidates for n in self.networks)


@lru_cache(maxsize=16)
def parse_rules(entries: tuple[str, ...]) -> Rules:
    """CIDRs or addresses, host names, and `.domain` suffixes; ValueError names a bad one."""
    networks, names, suffixes = [], set(), []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        suffix = entry.startswith(".")
        try:
            name = normalise_host(entry.lstrip("."))
        except EgressRefused:
            raise ValueError(f"{entry!r} is neither a CIDR, an address nor a host name") from None
        if suffix:
            suffixes.append("." + name)
        else:
            names.add(name)
    return Rules(tuple(networks), frozenset(names), tuple(suffixes))


def _allow() -> Rules:
    alias = getattr(settings, "WATCH_WEBHOOK_HOSTS", ())  # the old name, for webhooks
    return parse_rules((*getattr(settings, "EGRESS_ALLOW", ()), *alias))


def _deny() -> Rules:
    return parse_rules(tuple(getattr(settings, "EGRESS_DENY", ())))


def _only(purpose: str) -> Rules | None:
    # HANGDESK_WATCH_WEBHOOK_HOSTS meant "webhooks go only to these hosts"; it still does.
    only = getattr(settings, "WATCH_WEBHOOK_HOSTS", ()) if purpose == "webhook" else ()
    return parse_rules(tuple(only)) if only else None


# --- the check -------------------------------------------------------------------------------


def _resolve(host: str, port: int) -> list[Address]:
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise DeliveryError(UNREACHABLE, f"{host} does not resolve: {exc}") from None
    found: list[Address] = []
    for family, *_rest, sockaddr in answers:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        address = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if address not in found:
            found.append(address)
    if not found:
        raise DeliveryError(UNREACHABLE, f"{host} resolves to no IP address")
    return found


def check_destination(host: str, port: int, *, purpose: str) -> list[Address]:
    """Resolve `host` (every address it resolves to) and check each against the policy;
    return the allowed addresses or raise EgressRefused naming the rule (DeliveryError
    "unreachable" when the name does not resolve)."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown egress purpose {purpose!r}")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise EgressRefused(f"refused by policy: port {port!r} is not a port")
    name = normalise_host(host)
    literal = parse_address(name)
    allow, deny, only = _allow(), _deny(), _only(purpose)
    if literal is None:
        if deny.has_name(name):
            raise EgressRefused(f"refused by policy: {name} is denied by the operator")
        if only is not None and not only.has_name(name):
            raise EgressRefused(f"refused by policy: {name} is not among the {purpose} hosts")
        named = allow.has_name(name)
        implied = _implied_category(name)
        if implied and not named and implied not in _REACHABLE[purpose]:
            raise EgressRefused(f"refused by policy: {name} is a {implied} name")
        addresses = _resolve(name, port)
    else:
        if only is not None and not only.has_address(literal):
            raise EgressRefused(f"refused by policy: {name} is not among the {purpose} hosts")
        named, addresses = False, [literal]
    for address in addresses:
        _check_address(address, shown=name, purpose=purpose, named=named)
    return addresses


def _implied_category(name: str) -> str | None:
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return "loopback"
    if name in _METADATA_NAMES:
        return "link-local"
    return None


def _check_address(address: Address, *, shown: str, purpose: str, named: bool) -> None:
    what = f"{address} is" if shown == str(address) else f"{shown} resolves to {address},"
    kind = category(address)
    if _deny().has_address(address):
        raise EgressRefused(f"refused by policy: {what} denied by the operator")
    if kind == "unspecified":
        raise EgressRefused(f"refused by policy: {what} the unspecified address")
    if kind is None or kind in _REACHABLE[purpose] or named or _allow().has_address(address):
        return
    article = "an" if kind[0] in "aeiou" else "a"
    raise EgressRefused(f"refused by policy: {what} {article} {kind} address")


def connect(host: str, port: int, *, purpose: str, timeout: float) -> socket.socket:
    """check_destination, then a TCP connection to one of the checked addresses (never
    resolving again); DeliveryError "unreachable" / "timed out" when none answers."""
    addresses = check_destination(host, port, purpose=purpose)
    failure = DeliveryError(UNREACHABLE)
    for address in addresses:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect((str(address), port))  # a numeric address: no lookup happens here
            peer = ipaddress.ip_address(sock.getpeername()[0].split("%")[0])
            if peer not in addresses:  # the connection actually made, checked again
                raise EgressRefused(f"refused by policy: connected to unchecked {peer}")
            return sock
        except TimeoutError as exc:
            sock.close()
            failure = DeliveryError(TIMED_OUT, f"{address}:{port}: {exc}")
        except OSError as exc:
            sock.close()
            failure = DeliveryError(UNREACHABLE, f"{address}:{port}: {exc}")
        except BaseException:
            sock.close()
            raise
    log.info("egress %s to %s:%s failed: %s", purpose, host, port, failure.detail)
    raise failure


def check_url(url: str, *, purpose: str, resolve: bool = True) -> tuple[str, str, int]:
    """Check an http(s) URL's form and its destination; return (scheme, host, port). With
    `resolve`, a name that does not resolve here passes (the worker may see another DNS);
    a name that resolves to a refused address does not."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EgressRefused(f"not a usable URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise EgressRefused("refused by policy: only http:// and https:// URLs")
    if parts.username is not None or parts.password is not None:
        raise EgressRefused("refused by policy: no credentials in the URL's host part")
    host = normalise_host(parts.hostname or "")
    port = port if port is not None else (443 if parts.scheme == "https" else 80)
    if resolve:
        try:
            check_destination(host, port, purpose=purpose)
        except EgressRefused:
            raise
        except DeliveryError:
            pass
    return parts.scheme, host, port


# --- one HTTP request ------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpResult:
    status: int
    headers: Mapping[str, str]
    body: bytes


class _Connection(http.client.HTTPConnection):
    """http.client over a socket this module connected (and wrapped in TLS)."""

    def __init__(self, host: str, port: int, sock: socket.socket, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ready = sock

    def connect(self) -> None:
        self.sock = self._ready


def http_request(
    method: str,
    url: str,
    *,
    purpose: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10,
    max_response_bytes: int = 65536,
) -> HttpResult:
    """One HTTP(S) request over `connect` (TLS verified against the URL's host name, SNI set),
    redirects not followed, the whole exchange within `timeout`. Raises EgressRefused or
    DeliveryError(kind); never the raw socket error."""

    scheme, host, port = check_url(url, purpose=purpose, resolve=False)
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sock = connect(host, port, purpose=purpose, timeout=timeout)
    current, expired = [sock], threading.Event()  # the timer shuts whatever socket is current
    timer = threading.Timer(timeout, _expire, (current, expired))
    timer.daemon = True
    timer.start()
    try:
        if scheme == "https":
            current[0] = sock = _wrap_tls(sock, host)
        connection = _Connection(host, port, sock, timeout)
        try:
            connection.request(method, target, body=body, headers=_headers(headers))
            response = connection.getresponse()
            status, answer = response.status, _headers_of(response.getheaders())
            payload = _read_bounded(response, max_response_bytes)
        finally:
            connection.close()
    except (http.client.HTTPException, ValueError, UnicodeError, OSError) as exc:
        kind = _failure_kind(exc, expired=expired.is_set())
        log.info("egress %s %s failed (%s): %r", purpose, host, kind, exc)
        raise DeliveryError(kind, f"{type(exc).__name__}: {exc}") from None
    finally:
        timer.cancel()
        sock.close()
    return HttpResult(status=status, headers=answer, body=payload)


def _failure_kind(exc: Exception, *, expired: bool) -> str:

    if expired or isinstance(exc, TimeoutError):
        return TIMED_OUT
    if isinstance(exc, ssl.SSLError):
        return TLS
    if isinstance(exc, http.client.HTTPException | ValueError | UnicodeError):
        return NOT_HTTP  # a status line, header or body that is not HTTP (a banner, ...)
    return UNREACHABLE


def _expire(current: list[socket.socket], expired: threading.Event) -> None:
    expired.set()
    with contextlib.suppress(OSError):
        current[0].shutdown(socket.SHUT_RDWR)


def _wrap_tls(sock: socket.socket, host: str) -> socket.socket:

    context = ssl.create_default_context()
    extra_ca = getattr(settings, "EGRESS_CA_FILE", "")
    if extra_ca:  # an internal CA, on top of the system's
        context.load_verify_locations(cafile=extra_ca)
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except (ssl.SSLError, ssl.CertificateError) as exc:
        sock.close()
        raise DeliveryError(TLS, f"{type(exc).__name__}: {exc}") from None
    except OSError as exc:
        sock.close()
        kind = TIMED_OUT if isinstance(exc, TimeoutError) else UNREACHABLE
        raise DeliveryError(kind, str(exc)) from None


def _headers(given: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": "hangdesk", "Connection": "close"}
    headers.update(given or {})
    return headers


def _headers_of(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name.lower(): value[:1000] for name, value in list(pairs)[:100]}


def _read_bounded(response: http.client.HTTPResponse, limit: int) -> bytes:
    try:
        return response.read(limit)
    except http.client.IncompleteRead as exc:
        return exc.partial[:limit]
