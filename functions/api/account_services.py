"""The account services for a request, from the wiring (batchroute/wiring.py).

The seams tests override through `app.dependency_overrides` each have a small provider
here: an in-memory outbox for `get_mailer`, cheap argon2 parameters for `get_passwords`,
no minimum duration for `get_forgot_floor`, a permissive URL check for
`get_webhook_url_check`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Annotated

from fastapi import Depends

from batchroute.services.accounts.accounts import Registration
from batchroute.services.accounts.password_reset import FORGOT_FLOOR_SECONDS, PasswordReset, ResponseFloor
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.sessions import Sessions
from batchroute.services.accounts.settings import AccountSettings
from batchroute.services.accounts.verification import EmailVerification
from batchroute.services.delivery.ports import Mailer
from functions.api.deps import WiringDep


@lru_cache(maxsize=1)
def _production_passwords() -> Argon2Passwords:
    # One per cold start: it keeps the dummy hash that unknown-user sign-ins verify against.
    return Argon2Passwords()


def get_passwords() -> Argon2Passwords:
    return _production_passwords()


def get_mailer(wiring: WiringDep) -> Mailer:
    return wiring.mailer


def get_forgot_floor() -> ResponseFloor:
    return ResponseFloor(FORGOT_FLOOR_SECONDS)


def get_webhook_url_check(wiring: WiringDep) -> Callable[[str], object]:
    return wiring.webhook_url_check()


PasswordsDep = Annotated[Argon2Passwords, Depends(get_passwords)]
MailerDep = Annotated[Mailer, Depends(get_mailer)]


def get_email_verification(wiring: WiringDep, mailer: MailerDep) -> EmailVerification:
    return wiring.email_verification(mailer)


EmailVerificationDep = Annotated[EmailVerification, Depends(get_email_verification)]


def get_registration(
    wiring: WiringDep, passwords: PasswordsDep, verification: EmailVerificationDep
) -> Registration:
    return wiring.registration(passwords, verification)


def get_sessions(wiring: WiringDep, passwords: PasswordsDep, mailer: MailerDep) -> Sessions:
    return wiring.sessions(passwords, mailer)


def get_password_reset(
    wiring: WiringDep,
    passwords: PasswordsDep,
    mailer: MailerDep,
    floor: Annotated[ResponseFloor, Depends(get_forgot_floor)],
) -> PasswordReset:
    return wiring.password_reset(mailer, passwords, floor)


def get_account_settings(
    wiring: WiringDep, check_url: Annotated[Callable[[str], object], Depends(get_webhook_url_check)]
) -> AccountSettings:
    return wiring.account_settings(check_url)


RegistrationDep = Annotated[Registration, Depends(get_registration)]
SessionsDep = Annotated[Sessions, Depends(get_sessions)]
PasswordResetDep = Annotated[PasswordReset, Depends(get_password_reset)]
AccountSettingsDep = Annotated[AccountSettings, Depends(get_account_settings)]
