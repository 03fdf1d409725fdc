"""Password policy, the email-address check, and argon2id hashing."""

from __future__ import annotations

import pytest

from batchroute.domain.accounts.passwords import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    check_password,
    checked_email,
    is_email_address,
)
from batchroute.errors import InvalidRequest
from batchroute.services.accounts.passwords import Argon2Passwords


@pytest.mark.parametrize("length", [MIN_PASSWORD_LENGTH, 20, MAX_PASSWORD_LENGTH])
def test_passwords_within_the_limits_pass(length: int) -> None:
    check_password("x" * length)


@pytest.mark.parametrize("password", ["", "x" * (MIN_PASSWORD_LENGTH - 1), "x" * (MAX_PASSWORD_LENGTH + 1)])
def test_passwords_outside_the_limits_are_refused(password: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        check_password(password)
    assert refused.value.code == "invalid_password"


def test_length_counts_characters_not_bytes() -> None:
    # Given 8 characters that take 24 bytes in UTF-8 / Then the minimum is met
    check_password("€" * 8)
    with pytest.raises(InvalidRequest):
        check_password("€" * 7)


@pytest.mark.parametrize(
    "address",
    [
        "ann@example.com",
        "ann.lee+batch@mail.example.co.uk",
        "o'brien@example.io",
        "x@xn--80ak6aa92e.com",
        "dev@sub-domain.example.xn--p1ai",
    ],
)
def test_ordinary_addresses_are_accepted(address: str) -> None:
    assert is_email_address(address)


@pytest.mark.parametrize(
    "address",
    [
        "",
        "ann",
        "ann@",
        "@example.com",
        "ann@example",
        "ann@@example.com",
        "ann@exa mple.com",
        "ann lee@example.com",
        ".ann@example.com",
        "ann..lee@example.com",
        "ann@-example.com",
        "ann@example.c",
        "ann@example.123",
        "ann@127.0.0.1",
        "ann\n@example.com",
        "a" * 65 + "@example.com",
        "ann@" + "a" * 250 + ".com",
    ],
)
def test_malformed_addresses_are_refused(address: str) -> None:
    assert not is_email_address(address)


def test_checked_email_normalizes_or_refuses() -> None:
    assert checked_email("  Ann.Lee@Example.COM ") == "ann.lee@example.com"
    with pytest.raises(InvalidRequest) as refused:
        checked_email("not-an-address")
    assert refused.value.code == "invalid_email"


def test_production_parameters_are_owasp_argon2id() -> None:
    # Given the default hasher / When a password is hashed
    stored = Argon2Passwords().hash("correct horse battery")
    # Then argon2id with 19 MiB, two passes, one lane; never the password itself
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert "correct horse" not in stored


def test_verify_accepts_only_the_right_password() -> None:
    passwords = Argon2Passwords.cheap()
    stored = passwords.hash("s3cret-password")
    assert passwords.verify(stored, "s3cret-password")
    assert not passwords.verify(stored, "s3cret-passwore")
    assert not passwords.verify("not-a-hash", "s3cret-password")


def test_an_unknown_user_costs_a_real_verification() -> None:
    # Given a hasher whose verifications are counted
    passwords = Argon2Passwords.cheap()
    calls: list[str] = []
    real = passwords._verify

    def counted(stored: str, password: str) -> bool:
        calls.append(stored)
        return real(stored, password)

    passwords._verify = counted  # type: ignore[method-assign]
    # When there is no stored hash / Then a dummy argon2 hash is verified, and the answer is no
    assert passwords.verify(None, "whatever-password") is False
    assert len(calls) == 1 and calls[0].startswith("$argon2id$")


def test_hashes_made_with_other_parameters_need_a_rehash() -> None:
    cheap_hash = Argon2Passwords.cheap().hash("s3cret-password")
    production = Argon2Passwords()
    assert production.needs_rehash(cheap_hash)
    assert production.verify(cheap_hash, "s3cret-password")  # still verifies meanwhile
    assert not Argon2Passwords.cheap().needs_rehash(cheap_hash)
    assert production.needs_rehash("garbage")
