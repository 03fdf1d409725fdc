"""Registration, sign-in, email verification and password reset. Public, except resending
a verification link (a signed-in user)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from batchroute.services.accounts.settings import member_view
from batchroute.services.accounts.verification import MAX_TOKEN_LENGTH
from functions.api.auth import SessionPrincipal
from functions.api.deps import (
    EmailVerificationDep,
    PasswordResetDep,
    RegistrationDep,
    SessionsDep,
    SettingsDep,
)
from functions.api.envelope import errors_doc
from functions.api.limits import limit_anonymous
from functions.api.routes.accounts.sessions import set_session_cookie
from functions.api.schemas.accounts.accounts import (
    AccountCreated,
    AgentAccountCreated,
    AgentRegisterBody,
    EmailVerified,
    ForgotBody,
    LoginBody,
    MemberOut,
    RegisterBody,
    ResetBody,
    SessionOut,
    SignedInOut,
    VerificationResent,
    VerifyBody,
)
from functions.api.schemas.common import MoneyOut, Ok

router = APIRouter(tags=["authentication"])


_TAKEN = errors_doc({409: "An account with this email already exists (`email_taken`)"})
# Anonymous endpoints are throttled per client IP (and address) before any work: 429 + Retry-After.
_REGISTER_LIMIT = [Depends(limit_anonymous("register"))]
_LOGIN_LIMIT = [Depends(limit_anonymous("login"))]
_PASSWORD_LIMIT = [Depends(limit_anonymous("password"))]


@router.post(
    "/v1/auth/register",
    dependencies=_REGISTER_LIMIT,
    response_model=AccountCreated,
    responses=_TAKEN,
    summary="Create an account (org and owner user); a verification email is sent",
)
def register(body: RegisterBody, registration: RegistrationDep) -> AccountCreated:
    account = registration.register(
        email=body.email, password=body.password, full_name=body.full_name, display_name=body.display_name
    )
    return AccountCreated(
        org_id=account.org.org_id,
        user_id=account.user.user_id,
        email=account.user.email,
        verification_email_sent=account.verification_email_sent,
    )


@router.post(
    "/v1/auth/agent-register",
    dependencies=_REGISTER_LIMIT,
    response_model=AgentAccountCreated,
    responses=_TAKEN,
    summary="Create an account and an owner API key (shown once); free; a verification email is sent",
)
def agent_register(body: AgentRegisterBody, registration: RegistrationDep) -> AgentAccountCreated:
    account = registration.register_agent(
        email=body.email, password=body.password, display_name=body.display_name
    )
    assert account.api_key is not None and account.api_key_value is not None
    return AgentAccountCreated(
        org_id=account.org.org_id,
        user_id=account.user.user_id,
        email=account.user.email,
        verification_email_sent=account.verification_email_sent,
        api_key=account.api_key_value,
        key_id=account.api_key.key_id,
        credit_balance=MoneyOut(**account.credit_balance.to_api()),
    )


@router.post(
    "/v1/auth/login",
    dependencies=_LOGIN_LIMIT,
    response_model=SignedInOut,
    responses=errors_doc(
        {401: "Unknown email or wrong password (`invalid_credentials`, one answer for both)"}
    ),
    summary="Sign in with email and password; sets the `service_ui_session` cookie",
)
def login(body: LoginBody, sessions: SessionsDep, settings: SettingsDep, response: Response) -> SignedInOut:
    signed_in = sessions.login(body.email, body.password)
    set_session_cookie(response, signed_in.token, settings)
    response.headers["Cache-Control"] = "no-store"
    return SignedInOut(session=SessionOut.of(signed_in), user=MemberOut(**member_view(signed_in.user)))


_BAD_LINK = errors_doc({400: "The link's token is used, expired or unknown (`invalid_token`)"})


@router.get(
    "/v1/auth/verify-email",
    response_model=EmailVerified,
    responses=_BAD_LINK,
    summary="Confirm an email address: the link from the verification email",
)
def verify_email_link(
    verification: EmailVerificationDep,
    token: Annotated[str, Query(min_length=1, max_length=MAX_TOKEN_LENGTH)],
) -> EmailVerified:
    verification.verify(token)
    return EmailVerified()


@router.post(
    "/v1/auth/verify-email",
    response_model=EmailVerified,
    responses=_BAD_LINK,
    summary="Confirm an email address with the token from the verification email",
)
def verify_email(body: VerifyBody, verification: EmailVerificationDep) -> EmailVerified:
    verification.verify(body.token)
    return EmailVerified()


@router.post(
    "/v1/auth/verify-email/resend",
    response_model=VerificationResent,
    responses={
        **errors_doc({401: "Not signed in"}),
        **errors_doc({403: "An API key cannot do this (`user_session_required`)"}),
    },
    summary="Email a new verification link to the signed-in user (nothing when already verified)",
)
def resend_verification(
    principal: SessionPrincipal, verification: EmailVerificationDep
) -> VerificationResent:
    sent = verification.resend(principal)
    return VerificationResent(sent=sent, email_verified=not sent)


@router.post(
    "/v1/auth/password/forgot",
    dependencies=_PASSWORD_LIMIT,
    response_model=Ok,
    summary="Email a password-reset link; the answer is the same whether or not the address exists",
)
def forgot_password(body: ForgotBody, reset: PasswordResetDep) -> Ok:
    reset.forgot(body.email)
    return Ok()


@router.post(
    "/v1/auth/password/reset",
    dependencies=_PASSWORD_LIMIT,
    response_model=Ok,
    responses=errors_doc({401: "The reset token is used, expired or unknown (`invalid_token`)"}),
    summary="Set a new password with a reset token; signs the user out of every session",
)
def reset_password(body: ResetBody, reset: PasswordResetDep) -> Ok:
    reset.reset(body.token, body.password)
    return Ok()
