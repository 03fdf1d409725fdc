"""API keys and session tokens: shapes, environment-bound prefixes, keyed hashes.

Secrets are never stored: only an HMAC-SHA256 keyed with the deployment's app secret, so a
leaked table reveals no usable key, and lookup by hash stays one GetItem.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

Environment = Literal["production", "test", "local"]

# Current prefixes, bound to the environment; a key of one environment never works in another.
KEY_PREFIXES: dict[str, str] = {"production": "brk_live_", "test": "brk_test_", "local": "brk_local_"}
# Keys issued before the current prefix scheme; still accepted in their own environment.
LEGACY_KEY_PREFIXES: dict[str, str] = {"production": "br-live-", "test": "br-test-", "local": "br-local-"}

_KEY_BODY_BYTES = 32
_SESSION_BYTES = 32
MAX_KEY_LENGTH = 128


@dataclass(frozen=True)
class IssuedKey:
    value: str  # shown once, never stored
    key_hash: str
    display_prefix: str  # safe to show: prefix plus the first characters


def issue_api_key(environment: str, app_secret: bytes, *, legacy: bool = False) -> IssuedKey:
    prefix = (LEGACY_KEY_PREFIXES if legacy else KEY_PREFIXES)[environment]
    value = prefix + secrets.token_urlsafe(_KEY_BODY_BYTES)
    return IssuedKey(
        value=value, key_hash=keyed_hash(app_secret, value), display_prefix=value[: len(prefix) + 4]
    )


def key_belongs_to(environment: str, value: str) -> bool:
    """Cheap check before any lookup: the key's prefix must be this environment's."""
    if not value or len(value) > MAX_KEY_LENGTH:
        return False
    return value.startswith(KEY_PREFIXES[environment]) or value.startswith(LEGACY_KEY_PREFIXES[environment])


def keyed_hash(app_secret: bytes, value: str) -> str:
    return hmac.new(app_secret, value.encode("utf-8"), hashlib.sha256).hexdigest()


def same_hash(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def new_opaque_token() -> str:
    """A session cookie value or a single-use email token."""
    return secrets.token_urlsafe(_SESSION_BYTES)
