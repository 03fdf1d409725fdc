"""What delivery offers the other contexts, declared once: sealing secrets (webhook and
bucket credentials, schedule targets) and sending email."""

from __future__ import annotations

from typing import Protocol

from batchroute.domain.accounts.accounts import Org


class Orgs(Protocol):
    """adapters/dynamo/identity.py:IdentityStore: an org by id."""

    def get_org(self, org_id: str) -> Org | None: ...


class Sealer(Protocol):
    """adapters/kms.py:KmsSealer: envelope encryption bound to a context."""

    def seal(self, plaintext: str, *, context: dict[str, str]) -> str: ...

    def unseal(self, ciphertext: str, *, context: dict[str, str]) -> str: ...


class Mailer(Protocol):
    """adapters/email.py:SesMailer (a test's outbox locally): one plain-text email."""

    def send(self, to: str, subject: str, text: str) -> None: ...
