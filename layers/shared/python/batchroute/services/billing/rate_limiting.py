"""Rate limiting: per API key (or signed-in user) and per account, and tighter per-IP limits
for the anonymous registration, login and password endpoints. Refusals raise RateLimited
(429 with Retry-After). The numbers come from Settings; docs/rate-limits.md has the design.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from batchroute.clock import Clock
from batchroute.config import Settings
from batchroute.domain.access import Principal
from batchroute.domain.accounts import normalize_email
from batchroute.domain.credentials import keyed_hash
from batchroute.domain.rate_limits import Limit, WindowCounts, decide, position
from batchroute.errors import RateLimited, TransientError
from batchroute.observability import logger

AnonymousBucket = Literal["register", "login", "password"]


class RateCounters(Protocol):
    def hit(
        self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]
    ) -> dict[str, WindowCounts]: ...

    def give_back(self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class Rule:
    counter: str
    limit: Limit


@dataclass(frozen=True)
class RateLimitPolicy:
    enabled: bool = True
    window_seconds: int = 60
    per_key: int = 600
    per_account: int = 1200
    register_per_ip: int = 10
    register_window_seconds: int = 3600
    login_per_ip: int = 100
    login_per_ip_email: int = 20
    login_window_seconds: int = 600
    password_per_ip: int = 5
    password_per_email: int = 5
    password_window_seconds: int = 3600

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimitPolicy:
        return cls(
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


class RateLimiter:
    def __init__(
        self, counters: RateCounters, clock: Clock, policy: RateLimitPolicy, *, secret: bytes = b""
    ) -> None:
        self.counters = counters
        self.clock = clock
        self.policy = policy
        self.secret = secret  # keys the email digests, so counters never hold an address

    def check_caller(self, principal: Principal) -> None:
        """Per key (or user) and per account, both in one item keyed by the account: one
        round trip. A refused request is given back, so a runaway key cannot use up the
        room its account's other keys need."""
        if not self.policy.enabled:
            return
        window = self.policy.window_seconds
        if principal.key_id is not None:
            caller = Rule(f"key:{principal.key_id}", Limit("api_key", self.policy.per_key, window))
        else:
            caller = Rule(f"user:{principal.user_id}", Limit("user", self.policy.per_key, window))
        account = Rule("org", Limit("account", self.policy.per_account, window))
        self._check(f"org#{principal.org_id}", window, [caller, account], give_back_refused=True)

    def check_anonymous(self, bucket: AnonymousBucket, *, ip: str, email: str | None = None) -> None:
        """Registration, login and password endpoints, keyed by client IP (and email).

        Refused attempts stay counted: a client that keeps guessing stays throttled."""
        if not self.policy.enabled:
            return
        p = self.policy
        source = ip_scope(ip)
        if bucket == "register":
            window = p.register_window_seconds
            self._check(
                f"register#ip#{source}", window, [Rule("ip", Limit("register", p.register_per_ip, window))]
            )
        elif bucket == "login":
            window = p.login_window_seconds
            rules = [Rule("ip", Limit("login_ip", p.login_per_ip, window))]
            if email:
                # The pair, not the address alone: nobody can lock a user out from elsewhere.
                rules.append(
                    Rule(f"email:{self._digest(email)}", Limit("login", p.login_per_ip_email, window))
                )
            self._check(f"login#ip#{source}", window, rules)
        else:
            window = p.password_window_seconds
            self._check(
                f"password#ip#{source}", window, [Rule("ip", Limit("password", p.password_per_ip, window))]
            )
            if email:
                # Per address across IPs: nobody can flood a mailbox with reset emails.
                self._check(
                    f"password#email#{self._digest(email)}",
                    window,
                    [Rule("email", Limit("password_email", p.password_per_email, window))],
                )

    def _check(self, scope: str, window: int, rules: list[Rule], *, give_back_refused: bool = False) -> None:
        at = position(self.clock.now(), window)
        counters = [rule.counter for rule in rules]
        try:
            counts = self.counters.hit(scope, window_seconds=window, index=at.index, counters=counters)
        except TransientError:
            # Fail open: a throttled counter table must not take the whole API down.
            logger.warning("rate limit check skipped", extra={"scope_kind": scope.split("#", 1)[0]})
            return
        refused = [
            (rule, decision)
            for rule in rules
            if not (
                decision := decide(
                    rule.limit, counts[rule.counter], at.fraction, counted_if_refused=not give_back_refused
                )
            ).allowed
        ]
        if not refused:
            return
        if give_back_refused:
            try:
                self.counters.give_back(scope, window_seconds=window, index=at.index, counters=counters)
            except TransientError:
                logger.warning("rate limit give-back failed")
        rule, decision = max(refused, key=lambda pair: pair[1].retry_after_seconds)
        raise RateLimited(
            f"Too many requests ({rule.limit.name} limit: {rule.limit.requests} per "
            f"{rule.limit.window_seconds} s); retry after {decision.retry_after_seconds} s.",
            details={
                "limit": rule.limit.name,
                "max_requests": rule.limit.requests,
                "window_seconds": rule.limit.window_seconds,
            },
            retry_after_seconds=decision.retry_after_seconds,
        )

    def _digest(self, email: str) -> str:
        return keyed_hash(self.secret, normalize_email(email))[:32]


def ip_scope(ip: str) -> str:
    """The unit one client controls: an IPv4 address, or an IPv6 /64 (one subscriber's
    prefix: per-address limits on IPv6 would be trivially evaded)."""
    try:
        address = ipaddress.ip_address(ip.strip().split("%", 1)[0])
    except ValueError:
        return "".join(ch for ch in ip if ch.isalnum() or ch in ".:-")[:64] or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)
