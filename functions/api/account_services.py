"""Builds the account services for a request from settings, clock and adapters.

Each adapter has its own small provider, the seams tests override through
`app.dependency_overrides` (an in-memory outbox for `get_mailer`, cheap argon2 parameters
for `get_passwords`, no minimum duration for `get_forgot_floor`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial
from typing import Annotated

from fastapi import Depends

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.email import SesMailer
from batchroute.adapters.kms import KmsSealer
from batchroute.domain.network import check_public_https_url
from batchroute.money import Money
from batchroute.services.accounts.accounts import Registration
from batchroute.services.accounts.app_secret import app_secret
from batchroute.services.accounts.password_reset import FORGOT_FLOOR_SECONDS, PasswordReset, ResponseFloor
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.sessions import Sessions
from batchroute.services.accounts.settings import AccountSettings, Sealer
from batchroute.services.accounts.verification import EmailVerification, Mailer
from functions.api.auth import identity_store
from functions.api.deps import ClockDep, SettingsDep


@lru_cache(maxsize=1)
def _production_passwords() -> Argon2Passwords:
    # One per cold start: it keeps the dummy hash that unknown-user sign-ins verify against.
    return Argon2Passwords()


def get_passwords() -> Argon2Passwords:
    return _production_passwords()


def get_mailer(settings: SettingsDep) -> Mailer:
    return SesMailer.from_settings(settings)


def get_forgot_floor() -> ResponseFloor:
    return ResponseFloor(FORGOT_FLOOR_SECONDS)


def get_sealer(settings: SettingsDep) -> Sealer:
    return KmsSealer(settings.kms_key_id)


def get_webhook_url_check(settings: SettingsDep) -> Callable[[str], object]:
    # Loopback receivers are a local-development convenience, never honoured in production.
    allow_loopback = settings.allow_loopback_webhooks and settings.environment != "production"
    return partial(check_public_https_url, allow_loopback=allow_loopback, environment=settings.environment)


PasswordsDep = Annotated[Argon2Passwords, Depends(get_passwords)]
MailerDep = Annotated[Mailer, Depends(get_mailer)]


def get_email_verification(settings: SettingsDep, clock: ClockDep, mailer: MailerDep) -> EmailVerification:
    return EmailVerification(
        identity_store(), mailer, secret=app_secret, clock=clock, public_base_url=settings.public_base_url
    )


EmailVerificationDep = Annotated[EmailVerification, Depends(get_email_verification)]


def get_registration(
    settings: SettingsDep, clock: ClockDep, passwords: PasswordsDep, verification: EmailVerificationDep
) -> Registration:
    return Registration(
        identity_store(),
        LedgerStore(settings.table_name("ledger")),
        passwords,
        verification,
        environment=settings.environment,
        secret=app_secret,
        signup_credit=Money.usd(settings.effective_signup_credit_usd),
        clock=clock,
    )


def get_sessions(settings: SettingsDep, clock: ClockDep, passwords: PasswordsDep) -> Sessions:
    return Sessions(
        identity_store(), passwords, environment=settings.environment, secret=app_secret, clock=clock
    )


def get_password_reset(
    settings: SettingsDep,
    clock: ClockDep,
    passwords: PasswordsDep,
    mailer: MailerDep,
    floor: Annotated[ResponseFloor, Depends(get_forgot_floor)],
) -> PasswordReset:
    return PasswordReset(
        identity_store(),
        mailer,
        passwords,
        secret=app_secret,
        clock=clock,
        public_base_url=settings.public_base_url,
        floor=floor,
    )


def get_account_settings(
    settings: SettingsDep,
    clock: ClockDep,
    sealer: Annotated[Sealer, Depends(get_sealer)],
    check_url: Annotated[Callable[[str], object], Depends(get_webhook_url_check)],
) -> AccountSettings:
    return AccountSettings(
        identity_store(),
        LedgerStore(settings.table_name("ledger")),
        sealer,
        check_webhook_url=check_url,
        clock=clock,
    )


RegistrationDep = Annotated[Registration, Depends(get_registration)]
SessionsDep = Annotated[Sessions, Depends(get_sessions)]
PasswordResetDep = Annotated[PasswordReset, Depends(get_password_reset)]
AccountSettingsDep = Annotated[AccountSettings, Depends(get_account_settings)]
