"""Request and response models: registration, sign-in, sessions, email verification,
password reset, account, profile and delivery webhook.

Length limits here give the usual 400 `invalid_request` with the failing path; the services
check the same rules again for callers that do not come through the API.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.accounts.access import Role
from batchroute.domain.accounts.passwords import MAX_EMAIL_LENGTH, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from batchroute.services.accounts.accounts import MAX_DISPLAY_NAME, MAX_FULL_NAME
from batchroute.services.accounts.sessions import LiveSession
from batchroute.services.accounts.settings import AccountView
from batchroute.services.accounts.verification import MAX_TOKEN_LENGTH
from functions.api.schemas.common import MoneyOut
from functions.api.schemas.delivery.webhooks import WebhookTarget


def _email() -> Any:
    # Generous: the service checks and normalizes the address, answering `invalid_email`.
    return Field(max_length=MAX_EMAIL_LENGTH + 64, json_schema_extra={"format": "email"})


def _new_password() -> Any:
    return Field(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)


def _token() -> Any:
    return Field(min_length=1, max_length=MAX_TOKEN_LENGTH)


# -- requests ----------------------------------------------------------------------------
class RegisterBody(BaseModel):
    email: str = _email()
    password: str = _new_password()
    full_name: str | None = Field(default=None, max_length=MAX_FULL_NAME)
    display_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_DISPLAY_NAME,
        description="The organization's display name; defaults to the address's local part.",
    )


class AgentRegisterBody(BaseModel):
    email: str = _email()
    password: str = _new_password()
    display_name: str | None = Field(default=None, min_length=1, max_length=MAX_DISPLAY_NAME)


class LoginBody(BaseModel):
    email: str = Field(min_length=1, max_length=MAX_EMAIL_LENGTH + 64)
    # Any length a stored password could have had; a wrong one is simply 401.
    password: str = Field(min_length=1, max_length=1024)


class ForgotBody(BaseModel):
    email: str = _email()


class ResetBody(BaseModel):
    token: str = _token()
    password: str = _new_password()


class VerifyBody(BaseModel):
    token: str = _token()


class ProfileBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    display_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_DISPLAY_NAME,
        description="The organization's display name (owner or admin).",
    )
    full_name: str | None = Field(
        default=None,
        max_length=MAX_FULL_NAME,
        description="The signed-in user's own name (user sessions only); blank clears it.",
    )


class DeliveryWebhookBody(WebhookTarget):
    """The org's default webhook (PUT /v1/auth/account/delivery-webhook)."""


# -- responses ---------------------------------------------------------------------------
class AccountCreated(BaseModel):
    org_id: str
    user_id: str
    email: str
    email_verification_required: bool = True
    verification_email_sent: bool


class AgentAccountCreated(AccountCreated):
    api_key: str = Field(description="The key value. Shown once: store it now; it cannot be recovered.")
    key_id: str
    credit_balance: MoneyOut


class MemberOut(BaseModel):
    user_id: str
    email: str
    role: Role
    full_name: str | None
    display_name: str | None
    email_verified: bool
    created_at: str


class SessionOut(BaseModel):
    id: str
    user_id: str
    org_id: str
    role: Role
    email: str
    email_verified: bool
    created_at: str
    expires_at: str

    @classmethod
    def of(cls, live: LiveSession) -> SessionOut:
        return cls(
            id=live.session.session_id,
            user_id=live.user.user_id,
            org_id=live.user.org_id,
            role=live.user.role,
            email=live.user.email,
            email_verified=live.user.email_verified_at is not None,
            created_at=live.session.created_at,
            expires_at=live.session.expires_at,
        )


class SessionEnvelope(BaseModel):
    session: SessionOut | None


class SignedInOut(BaseModel):
    session: SessionOut
    user: MemberOut


class EmailVerified(BaseModel):
    ok: bool = True
    email_verified: bool = True


class VerificationResent(BaseModel):
    ok: bool = True
    sent: bool = Field(description="False when the address was already verified (nothing is sent).")
    email_verified: bool


class OrgOut(BaseModel):
    id: str
    display_name: str
    plan: str
    created_at: str


class DeliveryWebhookOut(BaseModel):
    url: str
    configured: bool
    updated_at: str | None


class AccountOut(BaseModel):
    org: OrgOut
    plan: str
    credit_balance: MoneyOut
    members: list[MemberOut]
    user: MemberOut | None = Field(description="The signed-in user; null for an API key.")
    delivery_webhook: DeliveryWebhookOut | None

    @classmethod
    def of(cls, view: AccountView) -> AccountOut:
        return cls.model_validate(view)
