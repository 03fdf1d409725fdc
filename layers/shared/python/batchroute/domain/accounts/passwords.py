"""Sign-in credential policy: how long a password may be and what counts as an email address.

Passwords follow NIST SP 800-63B: a minimum length, a generous maximum, no composition
rules. The address check is deliberately simple (one `@`, a dotted domain, no spaces or
controls): the verification email is the real proof that an address works.
"""

from __future__ import annotations

import re

from batchroute.domain.accounts.accounts import normalize_email
from batchroute.errors import InvalidRequest

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 256
MAX_EMAIL_LENGTH = 254  # RFC 5321 path limit

_LOCAL_PART = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$")
_DOMAIN_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_TOP_LEVEL = re.compile(r"^(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$")


def check_password(password: str) -> None:
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidRequest(
            f"A password must be {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters long.",
            code="invalid_password",
        )


def is_email_address(email: str) -> bool:
    if len(email) > MAX_EMAIL_LENGTH or email.count("@") != 1:
        return False
    local, domain = email.split("@")
    if not local or len(local) > 64 or not _LOCAL_PART.fullmatch(local):
        return False
    labels = domain.split(".")
    if len(labels) < 2 or not all(_DOMAIN_LABEL.fullmatch(label) for label in labels):
        return False
    return bool(_TOP_LEVEL.fullmatch(labels[-1]))


def checked_email(email: str) -> str:
    """The normalized address, or 400 `invalid_email`."""
    normalized = normalize_email(email)
    if not is_email_address(normalized):
        raise InvalidRequest("Enter a valid email address.", code="invalid_email")
    return normalized
