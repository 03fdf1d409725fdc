"""Registration, sign-in, email verification, password reset and account settings, with an
in-memory identity store, outbox and sealer (no AWS)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from batchroute.adapters.dynamo.identity import EmailTaken
from batchroute.adapters.email import MemoryOutbox
from batchroute.clock import FixedClock, isoformat
from batchroute.domain.accounts.access import Principal
from batchroute.domain.accounts.accounts import ApiKey, Org, Session, SpentToken, User
from batchroute.domain.accounts.credentials import keyed_hash
from batchroute.errors import Forbidden, InvalidRequest, NotFound, Unauthenticated
from batchroute.money import Money
from batchroute.services.accounts.accounts import Registration
from batchroute.services.accounts.password_reset import PasswordReset, ResponseFloor
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.sessions import SESSION_LIFETIME, Sessions
from batchroute.services.accounts.settings import AccountSettings, webhook_secret_context
from batchroute.services.accounts.verification import EmailVerification

SECRET = b"unit-test-secret"
BASE_URL = "https://app.example.test"
PASSWORD = "correct horse battery"


class FakeIdentity:
    """The IdentityStore methods the account services use, in memory."""

    def __init__(self) -> None:
        self.orgs: dict[str, Org] = {}
        self.users: dict[str, User] = {}
        self.claims: dict[str, str] = {}
        self.keys: dict[str, ApiKey] = {}
        self.sessions: dict[str, Session] = {}
        self.tokens: dict[tuple[str, str], dict[str, Any]] = {}
        self.extra_items: list[dict[str, Any]] = []

    def create_account(
        self, *, org: Org, user: User, api_key: ApiKey | None = None, extra: list[Any] | None = None
    ) -> None:
        if user.email in self.claims:
            raise EmailTaken("An account with this email already exists.")
        self.claims[user.email] = user.user_id
        self.orgs[org.org_id], self.users[user.user_id] = org, user
        if api_key is not None:
            self.keys[api_key.key_hash] = api_key
        self.extra_items.extend(extra or [])

    def user_by_email(self, email: str) -> User | None:
        user_id = self.claims.get(email)
        return self.users.get(user_id) if user_id else None

    def get_user(self, user_id: str) -> User | None:
        return self.users.get(user_id)

    def get_org(self, org_id: str) -> Org | None:
        return self.orgs.get(org_id)

    def members(self, org_id: str) -> list[User]:
        return [u for u in self.users.values() if u.org_id == org_id]

    def update_user(self, user_id: str, **changes: Any) -> None:
        self.users[user_id] = replace(self.users[user_id], **changes)

    def set_password(self, user_id: str, password_hash: str, *, verified_at: str) -> None:
        user = self.users[user_id]
        self.users[user_id] = replace(
            user,
            password_hash=password_hash,
            email_verified_at=user.email_verified_at or verified_at,
            credentials_version=user.credentials_version + 1,
        )

    def rehash_password(self, user_id: str, *, old_hash: str, new_hash: str) -> bool:
        if self.users[user_id].password_hash != old_hash:
            return False
        self.update_user(user_id, password_hash=new_hash)
        return True

    def update_org(self, org_id: str, **changes: Any) -> None:
        self.orgs[org_id] = replace(self.orgs[org_id], **changes)

    def key_by_hash(self, key_hash: str) -> ApiKey | None:
        return self.keys.get(key_hash)

    def put_session(self, session: Session) -> None:
        self.sessions[session.token_hash] = session

    def session_by_hash(self, token_hash: str) -> Session | None:
        return self.sessions.get(token_hash)

    def revoke_session(self, token_hash: str, at: str) -> None:
        self.sessions[token_hash] = replace(self.sessions[token_hash], revoked_at=at)

    def revoke_user_sessions(self, user_id: str, at: str, *, keep_token_hash: str | None = None) -> int:
        live = [s for s in self.sessions.values() if s.user_id == user_id and not s.revoked_at]
        for session in live:
            self.revoke_session(session.token_hash, at)
        return len(live)

    def put_token(
        self, *, purpose: str, token_hash: str, user_id: str, expires_at: str, credentials_version: int = 0
    ) -> None:
        self.tokens[(purpose, token_hash)] = {
            "user_id": user_id,
            "expires_at": expires_at,
            "credentials_version": credentials_version,
        }

    def consume_token(self, *, purpose: str, token_hash: str, now: str) -> SpentToken | None:
        token = self.tokens.get((purpose, token_hash))
        if token is None or token.get("used_at") or token["expires_at"] <= now:
            return None
        token["used_at"] = now
        return SpentToken(str(token["user_id"]), int(token["credentials_version"]))


class FakeWallets:
    def open_wallet_items(self, org_id: str, *, signup_credit: Money, at: str) -> list[dict[str, Any]]:
        return [{"wallet": org_id, "micros": signup_credit.micros}]

    def balance(self, org_id: str) -> Money:
        return Money.usd("25")


class FakeSealer:
    def __init__(self) -> None:
        self.sealed: list[tuple[str, dict[str, str]]] = []

    def seal(self, plaintext: str, *, context: dict[str, str]) -> str:
        self.sealed.append((plaintext, context))
        return f"sealed-{len(self.sealed)}"


class FailingMailer:
    def send(self, to: str, subject: str, text: str) -> None:
        raise RuntimeError("SES is down")


class NeverLocked:
    """A sign-in lockout that never locks (its rules: tests/integration/test_login_lockout.py)."""

    def check(self, email: str) -> None:
        return None

    def failed(self, email: str, user: User | None) -> None:
        return None


class CountingFloor(ResponseFloor):
    def __init__(self) -> None:
        super().__init__(0)
        self.entered = 0

    def __enter__(self) -> ResponseFloor:
        self.entered += 1
        return super().__enter__()


class World:
    """The services wired to shared fakes, as the API wires them to DynamoDB and SES."""

    def __init__(self, *, mailer: Any = None) -> None:
        self.store = FakeIdentity()
        self.outbox = MemoryOutbox()
        self.clock = FixedClock()
        self.passwords = Argon2Passwords.cheap()
        self.floor = CountingFloor()
        self.sealer = FakeSealer()
        self.url_checks: list[str] = []
        mail = mailer or self.outbox
        self.verification = EmailVerification(
            self.store, mail, secret=lambda: SECRET, clock=self.clock, public_base_url=BASE_URL
        )
        self.registration = Registration(
            self.store,
            FakeWallets(),
            self.passwords,
            self.verification,
            environment="local",
            secret=lambda: SECRET,
            signup_credit=Money.usd("25"),
            clock=self.clock,
        )
        self.sessions = Sessions(
            self.store,
            self.passwords,
            environment="local",
            secret=lambda: SECRET,
            clock=self.clock,
            lockout=NeverLocked(),  # type: ignore[arg-type]
        )
        self.reset = PasswordReset(
            self.store,
            mail,
            self.passwords,
            secret=lambda: SECRET,
            clock=self.clock,
            public_base_url=BASE_URL,
            floor=self.floor,
        )
        self.settings = AccountSettings(
            self.store, FakeWallets(), self.sealer, check_webhook_url=self._check_url, clock=self.clock
        )

    def _check_url(self, url: str) -> None:
        self.url_checks.append(url)
        if not url.startswith("https://"):
            raise InvalidRequest("The URL must use https.", code="https_required")

    def token_in(self, text: str) -> str:
        found = re.search(r"token=([A-Za-z0-9_\-]+)", text)
        assert found, text
        return found.group(1)


@pytest.fixture
def world() -> World:
    return World()


def _session_principal(user: User) -> Principal:
    return Principal(org_id=user.org_id, role=user.role, via="session", user_id=user.user_id, session_id="s")


# -- registration ------------------------------------------------------------------------
def test_register_creates_org_owner_and_wallet_and_sends_a_link(world: World) -> None:
    # When someone registers with a mixed-case padded address
    account = world.registration.register(email="  Ann@Example.COM ", password=PASSWORD, full_name=" Ann ")
    # Then one org and its owner, the address normalized, the password only as argon2id
    user = world.store.users[account.user.user_id]
    assert user.email == "ann@example.com" and user.role == "owner" and user.full_name == "Ann"
    assert user.password_hash.startswith("$argon2id$") and PASSWORD not in user.password_hash
    org = world.store.orgs[account.org.org_id]
    assert org.display_name == "ann" and org.owner_user_id == user.user_id and org.plan == "prepaid"
    # And the wallet items ride in the same transaction, with the signup credit
    assert world.store.extra_items == [{"wallet": org.org_id, "micros": 25_000_000}]
    # And a verification link went to the address
    [message] = world.outbox.to("ann@example.com")
    assert f"{BASE_URL}/v1/auth/verify-email?token=" in message.text
    assert account.verification_email_sent and account.api_key is None


def test_register_refuses_a_taken_address_in_any_spelling(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    with pytest.raises(EmailTaken):
        world.registration.register(email=" ANN@example.com", password=PASSWORD)


@pytest.mark.parametrize(
    ("email", "password", "code"),
    [("not-an-email", PASSWORD, "invalid_email"), ("ann@example.com", "short", "invalid_password")],
)
def test_register_checks_address_and_password(world: World, email: str, password: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        world.registration.register(email=email, password=password)
    assert refused.value.code == code
    assert not world.store.users


def test_a_failed_verification_email_does_not_undo_the_account() -> None:
    # Given SES failing / When someone registers / Then the account exists and says so
    world = World(mailer=FailingMailer())
    account = world.registration.register(email="ann@example.com", password=PASSWORD)
    assert account.user.user_id in world.store.users
    assert account.verification_email_sent is False


def test_agent_register_issues_an_owner_key_stored_only_as_its_hash(world: World) -> None:
    account = world.registration.register_agent(
        email="bot@example.com", password=PASSWORD, display_name="Bots"
    )
    assert account.api_key is not None and account.api_key_value is not None
    assert account.api_key_value.startswith("brk_local_")
    key = world.store.keys[keyed_hash(SECRET, account.api_key_value)]
    assert key.role == "owner" and key.label == "agent" and key.created_by_user_id == account.user.user_id
    assert account.api_key_value not in repr(world.store.keys)
    assert account.api_key_value not in repr(account)  # the answer shows it once, never in a log line
    assert account.org.display_name == "Bots" and account.credit_balance == Money.usd("25")
    assert world.outbox.to("bot@example.com")


# -- sign-in and sessions ----------------------------------------------------------------
def test_login_creates_a_14_day_session_known_only_by_its_hash(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    signed_in = world.sessions.login("ANN@example.com ", PASSWORD)
    stored = world.store.sessions[keyed_hash(SECRET, signed_in.token)]
    assert stored.session_id.startswith("sess_") and signed_in.token not in repr(world.store.sessions)
    assert signed_in.token not in repr(signed_in)
    assert stored.expires_at == isoformat(world.clock.now() + SESSION_LIFETIME)
    assert world.sessions.current(signed_in.token) is not None


def test_unknown_address_and_wrong_password_fail_alike(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    failures = []
    for email, password in [("nobody@example.com", PASSWORD), ("ann@example.com", "wrong password")]:
        with pytest.raises(Unauthenticated) as refused:
            world.sessions.login(email, password)
        failures.append((refused.value.code, refused.value.message, refused.value.details))
    assert failures[0] == failures[1]
    assert failures[0][0] == "invalid_credentials"


def test_login_upgrades_a_hash_made_with_weaker_parameters(world: World) -> None:
    # Given a user whose hash was made with parameters older than the current ones
    account = world.registration.register(email="ann@example.com", password=PASSWORD)
    weaker = Argon2Passwords(time_cost=1, memory_cost=8, parallelism=1).hash(PASSWORD)
    world.store.update_user(account.user.user_id, password_hash=weaker)
    world.sessions.passwords = Argon2Passwords(time_cost=2, memory_cost=16, parallelism=1)
    # When they sign in / Then the stored hash is replaced by one with current parameters
    world.sessions.login("ann@example.com", PASSWORD)
    upgraded = world.store.users[account.user.user_id].password_hash
    assert upgraded != weaker and "m=16,t=2,p=1" in upgraded


def test_sessions_end_when_they_expire_or_are_revoked(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    first = world.sessions.login("ann@example.com", PASSWORD)
    second = world.sessions.login("ann@example.com", PASSWORD)
    # When one is signed out / Then only that one ends
    world.sessions.logout(first.token)
    assert world.sessions.current(first.token) is None
    assert world.sessions.current(second.token) is not None
    with pytest.raises(Unauthenticated):
        world.sessions.logout(first.token)
    # And the other ends by itself after 14 days
    world.clock.advance(days=14, seconds=1)
    assert world.sessions.current(second.token) is None
    assert world.sessions.current(None) is None and world.sessions.current("forged") is None


# -- email verification ------------------------------------------------------------------
def test_a_verification_link_works_once(world: World) -> None:
    account = world.registration.register(email="ann@example.com", password=PASSWORD)
    token = world.token_in(world.outbox.messages[-1].text)
    assert ("verify_email", keyed_hash(SECRET, token)) in world.store.tokens
    world.verification.verify(token)
    assert world.store.users[account.user.user_id].email_verified_at == isoformat(world.clock.now())
    with pytest.raises(InvalidRequest) as again:
        world.verification.verify(token)
    assert again.value.code == "invalid_token"


def test_a_verification_link_expires_after_48_hours(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    token = world.token_in(world.outbox.messages[-1].text)
    world.clock.advance(hours=48)
    with pytest.raises(InvalidRequest):
        world.verification.verify(token)
    with pytest.raises(InvalidRequest):
        world.verification.verify("x" * 300)


def test_resend_sends_only_to_unverified_users_with_a_session(world: World) -> None:
    account = world.registration.register(email="ann@example.com", password=PASSWORD)
    principal = _session_principal(account.user)
    assert world.verification.resend(principal) is True
    assert len(world.outbox.messages) == 2
    world.verification.verify(world.token_in(world.outbox.messages[-1].text))
    assert world.verification.resend(principal) is False
    key = Principal(org_id=account.org.org_id, role="owner", via="api_key", key_id="key_x")
    with pytest.raises(Forbidden):
        world.verification.resend(key)


# -- password reset ----------------------------------------------------------------------
def test_forgot_mails_known_addresses_only_and_always_holds_the_floor(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    sent_before = len(world.outbox.messages)
    world.reset.forgot("nobody@example.com")
    assert len(world.outbox.messages) == sent_before
    world.reset.forgot("Ann@Example.com")
    [message] = world.outbox.messages[sent_before:]
    assert message.to == "ann@example.com" and f"{BASE_URL}/console/reset-password?token=" in message.text
    assert world.floor.entered == 2


def test_forgot_swallows_delivery_failures() -> None:
    world = World(mailer=FailingMailer())
    world.registration.register(email="ann@example.com", password=PASSWORD)
    world.reset.forgot("ann@example.com")  # no exception: the answer must not differ


def test_response_floor_sleeps_out_the_rest() -> None:
    ticks = iter([10.0, 10.2])
    slept: list[float] = []
    with ResponseFloor(0.6, monotonic=lambda: next(ticks), sleep=slept.append):
        pass
    assert slept == [pytest.approx(0.4)]
    ticks = iter([10.0, 11.0])
    with ResponseFloor(0.6, monotonic=lambda: next(ticks), sleep=slept.append):
        pass
    assert len(slept) == 1  # already past the floor: no sleep


def test_reset_sets_the_password_ends_sessions_and_works_once(world: World) -> None:
    account = world.registration.register(email="ann@example.com", password=PASSWORD)
    session = world.sessions.login("ann@example.com", PASSWORD)
    world.reset.forgot("ann@example.com")
    token = world.token_in(world.outbox.messages[-1].text)
    # A too-short password is refused before the token is spent
    with pytest.raises(InvalidRequest):
        world.reset.reset(token, "short")
    world.reset.reset(token, "a brand new password")
    assert world.sessions.current(session.token) is None
    with pytest.raises(Unauthenticated):
        world.sessions.login("ann@example.com", PASSWORD)
    world.sessions.login("ann@example.com", "a brand new password")
    # The inbox was proven, so the address counts as verified
    assert world.store.users[account.user.user_id].email_verified_at is not None
    with pytest.raises(Unauthenticated) as again:
        world.reset.reset(token, "another new password")
    assert again.value.code == "invalid_token"


def test_reset_tokens_expire_after_an_hour(world: World) -> None:
    world.registration.register(email="ann@example.com", password=PASSWORD)
    world.reset.forgot("ann@example.com")
    token = world.token_in(world.outbox.messages[-1].text)
    world.clock.advance(hours=1)
    with pytest.raises(Unauthenticated):
        world.reset.reset(token, "a brand new password")


# -- account settings --------------------------------------------------------------------
def _with_member(world: World) -> tuple[User, User]:
    account = world.registration.register(email="ann@example.com", password=PASSWORD)
    member = replace(
        account.user,
        user_id="user_member",
        email="bob@example.com",
        role="member",
        created_at=isoformat(world.clock.now() + timedelta(seconds=1)),
    )
    world.store.users[member.user_id] = member
    return account.user, member


def test_the_account_view_lists_org_balance_and_members(world: World) -> None:
    owner, member = _with_member(world)
    view = world.settings.view(_session_principal(member))
    assert view["org"]["id"] == owner.org_id and view["plan"] == "prepaid"
    assert view["credit_balance"] == {"currency": "usd", "amount": "25.00"}
    assert [m["email"] for m in view["members"]] == ["ann@example.com", "bob@example.com"]
    assert view["user"]["user_id"] == member.user_id and view["delivery_webhook"] is None
    assert "password_hash" not in repr(view)


def test_profile_display_name_is_the_orgs_and_needs_manage(world: World) -> None:
    owner, member = _with_member(world)
    with pytest.raises(Forbidden):
        world.settings.update_profile(_session_principal(member), display_name="Mine now")
    # A member may still set their own name
    view = world.settings.update_profile(_session_principal(member), full_name="Bob B")
    assert next(m for m in view["members"] if m["user_id"] == member.user_id)["full_name"] == "Bob B"
    view = world.settings.update_profile(_session_principal(owner), display_name=" Acme ")
    assert view["org"]["display_name"] == "Acme"


def test_an_api_key_may_rename_the_org_but_has_no_full_name(world: World) -> None:
    owner, _ = _with_member(world)
    key = Principal(org_id=owner.org_id, role="owner", via="api_key", key_id="key_x")
    assert world.settings.update_profile(key, display_name="Acme")["org"]["display_name"] == "Acme"
    with pytest.raises(Forbidden) as refused:
        world.settings.update_profile(key, display_name="Other", full_name="Nobody")
    assert refused.value.code == "user_session_required"
    assert world.store.orgs[owner.org_id].display_name == "Acme"  # nothing half-applied


def test_the_webhook_secret_is_sealed_to_its_org_and_never_shown(world: World) -> None:
    owner, member = _with_member(world)
    principal = _session_principal(owner)
    shown = world.settings.set_delivery_webhook(
        principal, url=" https://hooks.example.com/x ", secret="s3cret-hook"
    )
    assert shown == {
        "url": "https://hooks.example.com/x",
        "configured": True,
        "updated_at": isoformat(world.clock.now()),
    }
    assert world.sealer.sealed == [("s3cret-hook", webhook_secret_context(owner.org_id))]
    stored = world.store.orgs[owner.org_id].delivery_webhook
    assert stored is not None and stored["secret_ciphertext"] == "sealed-1"
    assert "s3cret-hook" not in repr(world.store.orgs)
    view = world.settings.view(principal)
    assert view["delivery_webhook"] == shown and "sealed" not in repr(view)
    with pytest.raises(Forbidden):
        world.settings.set_delivery_webhook(
            _session_principal(member), url="https://a.example", secret="x" * 8
        )


@pytest.mark.parametrize(
    ("url", "secret", "code"),
    [("http://hooks.example.com", "s3cret-hook", "https_required"), ("https://a.example", "short", None)],
)
def test_webhook_input_is_checked_before_sealing(
    world: World, url: str, secret: str, code: str | None
) -> None:
    owner, _ = _with_member(world)
    with pytest.raises(InvalidRequest) as refused:
        world.settings.set_delivery_webhook(_session_principal(owner), url=url, secret=secret)
    assert code is None or refused.value.code == code
    assert world.sealer.sealed == []


def test_a_vanished_org_is_404(world: World) -> None:
    principal = Principal(org_id="org_gone", role="owner", via="api_key", key_id="key_x")
    with pytest.raises(NotFound):
        world.settings.view(principal)
