"""Password hashing with argon2id.

Production parameters are OWASP's minimum for argon2id (19 MiB, two passes, one lane):
about 50-100 ms per hash on a Lambda core. Tests inject cheaper parameters through the
constructor; the stored hash records its own parameters, so hashes made with other
parameters still verify and are upgraded on the next sign-in (`needs_rehash`).
"""

from __future__ import annotations

import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

OWASP_TIME_COST = 2
OWASP_MEMORY_COST_KIB = 19_456
OWASP_PARALLELISM = 1


class Argon2Passwords:
    def __init__(
        self,
        *,
        time_cost: int = OWASP_TIME_COST,
        memory_cost: int = OWASP_MEMORY_COST_KIB,
        parallelism: int = OWASP_PARALLELISM,
    ) -> None:
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_cost, parallelism=parallelism)
        self._dummy_hash: str | None = None

    @classmethod
    def cheap(cls) -> Argon2Passwords:
        """Test-only parameters: same algorithm and code path, microseconds per hash."""
        return cls(time_cost=1, memory_cost=8, parallelism=1)

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, stored_hash: str | None, password: str) -> bool:
        """True when `password` matches. With no stored hash (unknown user) a dummy hash is
        verified anyway, so an unknown address costs the same time as a wrong password."""
        dummy = self._dummy()  # made on the first call whichever path it takes, so neither pays alone
        if stored_hash is None:
            self._verify(dummy, password)
            return False
        return self._verify(stored_hash, password)

    def needs_rehash(self, stored_hash: str) -> bool:
        try:
            return self._hasher.check_needs_rehash(stored_hash)
        except InvalidHashError:
            return True

    def _verify(self, stored_hash: str, password: str) -> bool:
        try:
            return self._hasher.verify(stored_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self._hasher.hash(secrets.token_urlsafe(16))
        return self._dummy_hash
