"""The SSRF guard for customer-supplied URLs (webhooks, delivery targets).

A URL is accepted only if it is HTTPS, names a host without credentials, and every address
that host resolves to is globally routable. The answer carries the checked addresses so the
sender connects to exactly those (pinning defeats DNS rebinding between check and connect).

`ipaddress.is_global` alone has gaps (it calls ::127.0.0.1, 64:ff9b::7f00:1 and
2002:7f00:1:: global), so it is paired with an explicit deny list and the IPv4 address
embedded in mapped, compatible, NAT64, 6to4 and Teredo forms is checked as IPv4.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from batchroute.errors import InvalidRequest

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

LOOPBACK_WEBHOOK_HOST = "127.0.0.1"
MAX_URL_LENGTH = 2048

DENIED_V4: tuple[ipaddress.IPv4Network, ...] = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this" network
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)

DENIED_V6: tuple[ipaddress.IPv6Network, ...] = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::/96",  # IPv4-compatible (deprecated): ::127.0.0.1
        "100::/64",  # discard-only
        "64:ff9b:1::/48",  # local-use NAT64
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local (covers fd00:ec2::254, the EC2 IPv6 metadata address)
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# A host whose last label is numeric is an IPv4 literal in some legacy spelling
# (2130706433, 0x7f.1, 127.1): resolvers accept them, nothing legitimate needs them.
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


@dataclass(frozen=True)
class ResolvedUrl:
    """A URL that passed the guard, with the addresses it was checked against."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UrlGuard:
    """The guard as one caller applies it: `allow_loopback` (a local-development convenience,
    never honoured in production), the `environment`, and `resolve` (None: the system
    resolver; unit tests inject one)."""

    allow_loopback: bool = False
    environment: str | None = "production"
    resolve: Resolver | None = None

    def check(self, url: str) -> ResolvedUrl:
        """`check_public_https_url` under these settings."""
        return check_public_https_url(
            url, allow_loopback=self.allow_loopback, environment=self.environment, resolve=self.resolve
        )


def reaches(resolved: ResolvedUrl, service_url: str) -> bool:
    """Whether an endpoint that passed the guard is `service_url` (the service's own AWS
    endpoint: local mode's moto, where no key is checked and every org's objects are): the
    same port, and the same host or both on this machine's loopback."""
    own = urlsplit(service_url)
    port = own.port or (443 if own.scheme == "https" else 80)
    if resolved.port != port or not own.hostname:
        return False
    if own.hostname.lower() == resolved.host.lower():
        return True
    return _loopback(own.hostname) and any(_loopback(address) for address in resolved.addresses)


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for host (A and AAAA)."""
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(sockaddr[0]) for *_, sockaddr in answers]


def check_public_https_url(
    url: str,
    *,
    allow_loopback: bool = False,
    environment: str | None = None,
    resolve: Resolver | None = None,
) -> ResolvedUrl:
    """Accept a public HTTPS URL or raise InvalidRequest (`https_required`, `unsafe_url`,
    `invalid_url`, `unresolvable_host`).

    `allow_loopback` (ALLOW_LOOPBACK_WEBHOOKS outside production) admits exactly
    http(s)://127.0.0.1[:port] for local development; it is ignored when `environment`
    is production, so a misconfigured caller still fails closed.
    """
    loopback_allowed = allow_loopback and environment != "production"
    if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL_LENGTH:
        raise _invalid("The URL is missing or longer than 2048 characters.")
    url = url.strip()
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise _invalid("The URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        port_given = parts.port
    except ValueError as exc:
        raise _invalid("The URL is malformed (bad host or port).") from exc
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").lower()
    if scheme not in ("https", "http"):
        raise _https_required()
    if not host:
        raise _invalid("The URL needs a host.")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _unsafe("The URL must not carry credentials (user:password@host).")
    if port_given == 0:
        raise _invalid("Port 0 is not a valid port.")
    port = port_given or (443 if scheme == "https" else 80)

    if loopback_allowed and host == LOOPBACK_WEBHOOK_HOST:
        return ResolvedUrl(url=url, scheme=scheme, host=host, port=port, addresses=(host,))
    if scheme != "https":
        raise _https_required()

    literal = _ip_literal(host)
    if literal is not None:
        addresses = [str(literal)]
    else:
        if host == "localhost" or host.endswith(".localhost") or _NUMERIC_LABEL.match(host.split(".")[-1]):
            raise _unsafe(f"The host {host!r} is not a public name.")
        addresses = _resolve(resolve or system_resolver, host, port)
    for address in addresses:
        reason = refusal_reason(address)
        if reason is not None:
            raise _unsafe(
                f"The host {host!r} resolves to {address}, which is not a public address ({reason})."
            )
    return ResolvedUrl(url=url, scheme=scheme, host=host, port=port, addresses=tuple(addresses))


def is_public_address(address: str) -> bool:
    return refusal_reason(address) is None


def refusal_reason(address: str) -> str | None:
    """Why an address may not be contacted, or None when it is globally routable."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_v4(ip)
        if embedded is not None:
            inner = refusal_reason(str(embedded))
            if inner is not None:
                return f"embeds {embedded}: {inner}"
        for network in DENIED_V6:
            if ip in network:
                return f"in {network}"
    else:
        for v4_network in DENIED_V4:
            if ip in v4_network:
                return f"in {v4_network}"
    if not ip.is_global:
        return "not globally routable"
    return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a v6 form stands for: mapped, NAT64, 6to4, Teredo client."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _resolve(resolve: Resolver, host: str, port: int) -> list[str]:
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise InvalidRequest(
            f"The host {host!r} does not resolve.", code="unresolvable_host", details={"host": host}
        ) from exc
    if not addresses:
        raise InvalidRequest(
            f"The host {host!r} does not resolve.", code="unresolvable_host", details={"host": host}
        )
    return list(dict.fromkeys(addresses))  # unique, in answer order


def _https_required() -> InvalidRequest:
    return InvalidRequest("The URL must use https.", code="https_required")


def _unsafe(message: str) -> InvalidRequest:
    return InvalidRequest(message, code="unsafe_url")


def _invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_url")
