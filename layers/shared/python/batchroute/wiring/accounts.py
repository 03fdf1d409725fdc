"""The accounts context: authentication, API keys, registration, sessions, lockout,
password reset, account settings. The seams tests replace (a mailer, password hashing, a
URL check) are arguments."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.routing import RoutingWiring

if TYPE_CHECKING:
    from batchroute.services.accounts.accounts import Registration
    from batchroute.services.accounts.api_keys import ApiKeys
    from batchroute.services.accounts.authentication import Authenticator
    from batchroute.services.accounts.login_lockout import LockoutPolicy, LoginLockout
    from batchroute.services.accounts.password_reset import PasswordReset, ResponseFloor
    from batchroute.services.accounts.passwords import Argon2Passwords
    from batchroute.services.accounts.sessions import Sessions
    from batchroute.services.accounts.settings import AccountSettings
    from batchroute.services.accounts.verification import EmailVerification
    from batchroute.services.billing.rate_limiting import RateLimiter, RateLimitPolicy
    from batchroute.services.delivery.ports import Mailer


class AccountsWiring(RoutingWiring):
    @cached_property
    def authenticator(self) -> Authenticator:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.authentication import Authenticator

        return Authenticator(
            self.identity, environment=self.settings.environment, secret=app_secret, clock=self.clock
        )

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.billing.rate_limiting import RateLimiter

        return RateLimiter(self.rate_counters, self.clock, self.rate_limit_policy, secret=app_secret())

    @cached_property
    def rate_limit_policy(self) -> RateLimitPolicy:
        """The deployment's rate limits (docs/rate-limits.md)."""
        from batchroute.services.billing.rate_limiting import RateLimitPolicy

        settings = self.settings
        return RateLimitPolicy(
            enabled=settings.rate_limits_enabled,
            window_seconds=settings.rate_limit_window_seconds,
            per_key=settings.rate_limit_per_key,
            per_account=settings.rate_limit_per_account,
            register_per_ip=settings.rate_limit_register_per_ip,
            register_window_seconds=settings.rate_limit_register_window_seconds,
            login_per_ip=settings.rate_limit_login_per_ip,
            login_per_ip_email=settings.rate_limit_login_per_ip_email,
            login_window_seconds=settings.rate_limit_login_window_seconds,
            password_per_ip=settings.rate_limit_password_per_ip,
            password_per_email=settings.rate_limit_password_per_email,
            password_window_seconds=settings.rate_limit_password_window_seconds,
        )

    @cached_property
    def lockout_policy(self) -> LockoutPolicy:
        """When repeated failed sign-ins lock an address (docs/rate-limits.md, "Account lockout")."""
        from batchroute.services.accounts.login_lockout import LockoutPolicy

        return LockoutPolicy(
            failures=self.settings.login_lockout_failures,
            window_seconds=self.settings.login_lockout_window_seconds,
            lock_seconds=self.settings.login_lockout_seconds,
        )

    @cached_property
    def api_keys(self) -> ApiKeys:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.api_keys import ApiKeys

        return ApiKeys(
            self.identity, environment=self.settings.environment, secret=app_secret, clock=self.clock
        )

    def email_verification(self, mailer: Mailer) -> EmailVerification:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.verification import EmailVerification

        return EmailVerification(
            self.identity,
            mailer,
            secret=app_secret,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
        )

    def registration(self, passwords: Argon2Passwords, verification: EmailVerification) -> Registration:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.money import Money
        from batchroute.services.accounts.accounts import Registration

        return Registration(
            self.identity,
            self.ledger,
            passwords,
            verification,
            environment=self.settings.environment,
            secret=app_secret,
            signup_credit=Money.usd(self.settings.effective_signup_credit_usd),
            clock=self.clock,
        )

    def sessions(self, passwords: Argon2Passwords, mailer: Mailer) -> Sessions:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.sessions import Sessions

        return Sessions(
            self.identity,
            passwords,
            environment=self.settings.environment,
            secret=app_secret,
            clock=self.clock,
            lockout=self.login_lockout(mailer),
        )

    def login_lockout(self, mailer: Mailer) -> LoginLockout:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.adapters.dynamo.rate_limits import LoginLockStore
        from batchroute.services.accounts.login_lockout import LoginLockout

        return LoginLockout(
            self.rate_counters,
            LoginLockStore(self.settings.table_name("controls")),
            mailer,
            policy=self.lockout_policy,
            secret=app_secret,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
        )

    def password_reset(
        self, mailer: Mailer, passwords: Argon2Passwords, floor: ResponseFloor
    ) -> PasswordReset:
        from batchroute.adapters.app_secret import app_secret
        from batchroute.services.accounts.password_reset import PasswordReset

        return PasswordReset(
            self.identity,
            mailer,
            passwords,
            secret=app_secret,
            clock=self.clock,
            public_base_url=self.settings.public_base_url,
            floor=floor,
        )

    def account_settings(self, check_url: Callable[[str], object]) -> AccountSettings:
        from batchroute.services.accounts.settings import AccountSettings

        return AccountSettings(
            self.identity, self.ledger, self.sealer, check_webhook_url=check_url, clock=self.clock
        )
