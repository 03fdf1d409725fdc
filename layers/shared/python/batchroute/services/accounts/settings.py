"""The account read model, the profile, and the org's default delivery webhook.

Profile semantics: `display_name` is the organization's display name (owner and admin, via
session or API key); `full_name` is the caller's own user's name (any role): the signed-in
user's, or through an API key the name of the user the key belongs to (its creator; the
user `agent-register` registered). A key with no user (or whose user is gone) gets 403
`user_session_required`. A request is checked whole before anything is written.

The webhook secret is sealed with KMS (context: org id and purpose) before it is stored and
is never returned; the webhook worker unseals it with the same context to sign deliveries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, Role, authorize, no_user, require_user
from batchroute.domain.accounts.accounts import DeliveryWebhookConfig, Org, User
from batchroute.domain.delivery.webhook_targets import webhook_target_problems
from batchroute.domain.delivery.webhooks import webhook_secret_context
from batchroute.domain.views import view_of
from batchroute.errors import InvalidRequest, NotFound
from batchroute.money import MoneyView
from batchroute.services.accounts.accounts import clean_display_name, clean_full_name
from batchroute.services.accounts.ports import UserRecords
from batchroute.services.billing.ports import Balances
from batchroute.services.delivery.ports import Orgs, Sealer

_PROBLEM_ORDER = {"invalid_url": 0, "invalid_webhook_secret": 1}


class SettingsStore(Orgs, UserRecords, Protocol):
    def members(self, org_id: str) -> list[User]: ...

    def update_org(self, org_id: str, **changes: object) -> None: ...


class MemberView(TypedDict):
    user_id: str
    email: str
    role: Role
    full_name: str | None
    display_name: str | None
    email_verified: bool
    created_at: str


class WebhookView(TypedDict):
    url: str
    configured: bool
    updated_at: str | None


class OrgView(TypedDict):
    id: str
    display_name: str
    plan: str
    created_at: str


class AccountView(TypedDict):
    org: OrgView
    plan: str
    credit_balance: MoneyView
    members: list[MemberView]
    user: MemberView | None
    delivery_webhook: WebhookView | None


def member_view(user: User) -> MemberView:
    return view_of(user, MemberView, email_verified=user.email_verified_at is not None)


def webhook_view(config: DeliveryWebhookConfig | None) -> WebhookView | None:
    if not config or not config.get("url"):
        return None
    # Only what the owner may see again: never the secret, not even its ciphertext.
    return {"url": config["url"], "configured": True, "updated_at": config.get("updated_at")}


@dataclass(eq=False)
class AccountSettings:
    store: SettingsStore
    balances: Balances
    sealer: Sealer
    _: KW_ONLY
    check_webhook_url: Callable[[str], object]
    clock: Clock

    def view(self, principal: Principal) -> AccountView:
        authorize(principal, "account:read")
        org = self._org(principal)
        members = sorted(self.store.members(org.org_id), key=lambda u: (u.created_at, u.user_id))
        # The caller's own user: the signed-in user, or the user an API key belongs to.
        caller = next((m for m in members if m.user_id == principal.acting_user_id), None)
        return {
            "org": {
                "id": org.org_id,
                "display_name": org.display_name,
                "plan": org.plan,
                "created_at": org.created_at,
            },
            "plan": org.plan,
            "credit_balance": self.balances.balance(org.org_id).to_api(),
            "members": [member_view(m) for m in members],
            "user": member_view(caller) if caller else None,
            "delivery_webhook": webhook_view(org.delivery_webhook),
        }

    def update_profile(
        self, principal: Principal, *, display_name: str | None = None, full_name: str | None = None
    ) -> AccountView:
        authorize(principal, "account:read")
        org_name = clean_display_name(display_name)
        if org_name is not None:
            authorize(principal, "account:manage")
        user_id = self._own_user(principal) if full_name is not None else None
        self._org(principal)
        if org_name is not None:
            self.store.update_org(principal.org_id, display_name=org_name)
        if full_name is not None and user_id is not None:
            # Blank clears the name (stored as absent).
            self.store.update_user(user_id, full_name=clean_full_name(full_name))
        return self.view(principal)

    def _own_user(self, principal: Principal) -> str:
        """The user whose own name the caller may set; a key whose user no longer exists (or
        is no longer in the key's org) has no user."""
        user_id = require_user(principal)
        if principal.via == "api_key":
            user = self.store.get_user(user_id)
            if user is None or user.org_id != principal.org_id:
                raise no_user()
        return user_id

    def set_delivery_webhook(self, principal: Principal, *, url: str, secret: str) -> WebhookView:
        authorize(principal, "delivery:manage")
        url = url.strip()
        problems = webhook_target_problems({"url": url, "secret": secret}, check_url=self.check_webhook_url)
        if problems:  # a URL too long first, then the secret, then what the guard said
            first = min(problems, key=lambda p: _PROBLEM_ORDER.get(p.code, len(_PROBLEM_ORDER)))
            raise InvalidRequest(first.message, code=first.code, details=first.details)
        self._org(principal)
        config: DeliveryWebhookConfig = {
            "url": url,
            "secret_ciphertext": self.sealer.seal(secret, context=webhook_secret_context(principal.org_id)),
            "updated_at": isoformat(self.clock.now()),
        }
        self.store.update_org(principal.org_id, delivery_webhook=config)
        view = webhook_view(config)
        assert view is not None
        return view

    def _org(self, principal: Principal) -> Org:
        org = self.store.get_org(principal.org_id)
        if org is None:
            raise NotFound("The account no longer exists.", code="account_not_found")
        return org
