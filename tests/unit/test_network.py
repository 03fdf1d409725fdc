"""The SSRF guard: public HTTPS only, every resolved address checked (sockets are off here:
the resolver is injected)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.delivery.network import (
    DENIED_V4,
    DENIED_V6,
    ResolvedUrl,
    check_public_https_url,
    is_public_address,
    refusal_reason,
)
from batchroute.errors import InvalidRequest

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


def resolver(*answers: str) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        return list(answers)

    return resolve


def refuse(url: str, code: str = "unsafe_url", **kwargs: object) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        check_public_https_url(url, **kwargs)  # type: ignore[arg-type]
    assert caught.value.code == code, caught.value.message
    return caught.value


def test_a_public_https_name_is_accepted_with_its_checked_addresses() -> None:
    # Given a name that resolves to public v4 and v6 addresses
    resolve = resolver(PUBLIC_V4, PUBLIC_V6, PUBLIC_V4)
    # When checked
    result = check_public_https_url("https://hooks.example.com:8443/in?x=1", resolve=resolve)
    # Then it passes, with the addresses to pin the connection to (deduplicated, in order)
    assert result == ResolvedUrl(
        url="https://hooks.example.com:8443/in?x=1",
        scheme="https",
        host="hooks.example.com",
        port=8443,
        addresses=(PUBLIC_V4, PUBLIC_V6),
    )
    assert check_public_https_url("https://Hooks.Example.COM./x", resolve=resolve).port == 443


@pytest.mark.parametrize(
    "url", ["http://hooks.example.com/in", "ftp://hooks.example.com/", "hooks.example.com/in", "//x.com"]
)
def test_anything_but_https_is_refused_as_https_required(url: str) -> None:
    refuse(url, "https_required", resolve=resolver(PUBLIC_V4))


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pass@hooks.example.com/",
        "https://user@hooks.example.com/",
        "https://hooks.example.com@127.0.0.1/",
    ],
)
def test_credentials_in_the_url_are_refused(url: str) -> None:
    refuse(url, resolve=resolver(PUBLIC_V4))


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "https://",
        "https:///path",
        "https://host:99999/",
        "https://host:0/",
        "https://ho st/",
        "https://[::1",
    ],
)
def test_malformed_urls_are_invalid(url: str) -> None:
    refuse(url, "invalid_url", resolve=resolver(PUBLIC_V4))


def test_overlong_url_is_invalid() -> None:
    refuse("https://example.com/" + "a" * 2048, "invalid_url", resolve=resolver(PUBLIC_V4))


@pytest.mark.parametrize(
    "address",
    [
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.1",
        "100.127.255.254",
        "127.0.0.1",
        "127.255.0.1",
        "169.254.169.254",  # cloud metadata
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.1",
        "192.0.0.9",  # is_global says True: the explicit list catches it
        "192.0.2.1",
        "192.88.99.1",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
    ],
)
def test_every_denied_ipv4_range_is_refused_by_name_and_literal(address: str) -> None:
    # Given a DNS name answering the address / Then refused
    error = refuse("https://hooks.example.com/", resolve=resolver(address))
    assert address in error.message
    # And the same address as a literal host
    refuse(f"https://{address}/", resolve=resolver(PUBLIC_V4))


@pytest.mark.parametrize(
    "address",
    [
        "::",
        "::1",
        "::127.0.0.1",  # IPv4-compatible: is_global says True
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "::ffff:7f00:1",
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1: is_global says True
        "64:ff9b::a9fe:a9fe",  # NAT64 of the metadata address
        "64:ff9b:1::1",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1: is_global says True
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "2001:db8::1",
        "fe80::1",
        "fe80::1%eth0",
        "febf:ffff::1",
        "fec0::1",
        "fc00::1",
        "fd00:ec2::254",  # the EC2 IPv6 metadata address
        "ff02::1",
        "ff0e::1",
        "100::1",
    ],
)
def test_every_denied_ipv6_form_is_refused(address: str) -> None:
    refuse("https://hooks.example.com/", resolve=resolver(address))
    if "%" not in address:
        refuse(f"https://[{address}]/", resolve=resolver(PUBLIC_V4))


def test_public_embedded_forms_are_judged_by_the_embedded_address() -> None:
    # 6to4 of a public v4 address is routable; NAT64 of one too
    assert is_public_address("2002:5db8:d822::1")
    assert is_public_address("64:ff9b::5db8:d822")
    assert not is_public_address("not-an-address")


def test_one_private_answer_among_public_ones_refuses_the_url() -> None:
    # Given a name with a public and a private answer (a rebinding attempt)
    resolve = resolver(PUBLIC_V4, "10.0.0.5", PUBLIC_V6)
    # Then refused, naming the private address
    assert "10.0.0.5" in refuse("https://hooks.example.com/", resolve=resolve).message


def test_a_name_that_does_not_resolve_is_refused() -> None:
    def fails(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    refuse("https://nowhere.example/", "unresolvable_host", resolve=fails)
    refuse("https://nowhere.example/", "unresolvable_host", resolve=resolver())


@pytest.mark.parametrize(
    "host", ["localhost", "api.localhost", "2130706433", "0x7f000001", "0x7f.1", "127.1", "017700000001"]
)
def test_loopback_names_and_legacy_numeric_hosts_are_refused_without_resolving(host: str) -> None:
    def must_not_resolve(name: str, port: int) -> list[str]:
        raise AssertionError("resolved")

    refuse(f"https://{host}/", resolve=must_not_resolve)


def test_loopback_webhooks_admit_exactly_127_0_0_1_outside_production() -> None:
    # Given ALLOW_LOOPBACK_WEBHOOKS in local mode
    allowed = check_public_https_url("http://127.0.0.1:9000/hook", allow_loopback=True, environment="local")
    # Then http and https on 127.0.0.1 pass without resolving, pinned to 127.0.0.1
    assert allowed.addresses == ("127.0.0.1",) and allowed.port == 9000 and allowed.scheme == "http"
    assert check_public_https_url("https://127.0.0.1/h", allow_loopback=True).port == 443
    # But no other loopback spelling, and no plain http elsewhere
    refuse("http://localhost:9000/", "https_required", allow_loopback=True, environment="local")
    refuse("https://localhost:9000/", allow_loopback=True, environment="local")
    refuse("https://[::1]:9000/", allow_loopback=True, environment="local")
    refuse("https://127.0.0.2:9000/", allow_loopback=True, environment="local")
    refuse("http://hooks.example.com/", "https_required", allow_loopback=True, resolve=resolver(PUBLIC_V4))


def test_loopback_is_never_admitted_in_production() -> None:
    # Given a caller that (wrongly) asks for loopback in production / Then the guard fails closed
    refuse("http://127.0.0.1:9000/hook", "https_required", allow_loopback=True, environment="production")
    refuse("https://127.0.0.1:9000/hook", allow_loopback=True, environment="production")
    # And without the flag, loopback is refused everywhere
    refuse("https://127.0.0.1:9000/hook", environment="local")


def test_the_deny_lists_cover_the_reference_ranges() -> None:
    reference_v4 = [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ]
    reference_v6 = ["::/128", "::1/128", "fe80::/10", "fc00::/7", "ff00::/8", "2001:db8::/32"]
    assert {ipaddress.IPv4Network(n) for n in reference_v4} <= set(DENIED_V4)
    assert {ipaddress.IPv6Network(n) for n in reference_v6} <= set(DENIED_V6)


_DENIED_V4_ADDRESSES = st.sampled_from(DENIED_V4).flatmap(
    lambda net: st.integers(int(net.network_address), int(net.broadcast_address)).map(ipaddress.IPv4Address)
)
_DENIED_V6_ADDRESSES = st.sampled_from(DENIED_V6).flatmap(
    lambda net: st.integers(int(net.network_address), int(net.broadcast_address)).map(ipaddress.IPv6Address)
)


@given(_DENIED_V4_ADDRESSES)
def test_any_address_in_a_denied_v4_range_is_refused_in_every_spelling(
    address: ipaddress.IPv4Address,
) -> None:
    assert refusal_reason(str(address)) is not None
    assert refusal_reason(f"::ffff:{address}") is not None  # mapped
    assert (
        refusal_reason(str(ipaddress.IPv6Address((0x2002 << 112) | (int(address) << 80)))) is not None
    )  # 6to4
    assert refusal_reason(str(ipaddress.IPv6Address((0x64FF9B << 96) | int(address)))) is not None  # NAT64


@given(_DENIED_V6_ADDRESSES)
def test_any_address_in_a_denied_v6_range_is_refused(address: ipaddress.IPv6Address) -> None:
    assert refusal_reason(str(address)) is not None


@given(st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address))
def test_an_accepted_v4_address_is_global_and_outside_every_denied_range(
    address: ipaddress.IPv4Address,
) -> None:
    if is_public_address(str(address)):
        assert address.is_global
        assert not any(address in net for net in DENIED_V4)
