"""Rate limiting: per API key (or signed-in user) and per account, and tighter per-IP limits
for the anonymous registration, login and password endpoints. Refusals raise RateLimited
(429 with Retry-After). The numbers come from Settings; docs/rate-limits.md has the design.
"""

from __future__ import annotations

import ipaddress
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Literal, Protocol

from batchroute.clock import Clock
from batchroute.domain.accounts.access import Principal
from batchroute.domain.accounts.accounts import normalize_email
from batchroute.domain.accounts.credentials import keyed_hash
from batchroute.domain.billing.rate_limits import (
    CallerGate,
    Decision,
    Limit,
    Rule,
    WindowCounts,
    decide,
    most_counted_before,
    position,
)
from batchroute.errors import RateLimited, TransientError
from batchroute.observability import logger

AnonymousBucket = Literal["register", "login", "password"]
_MAX_REMEMBERED = 10_000


class RateCounters(Protocol):
    def hit(
        self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]
    ) -> dict[str, WindowCounts]: ...

    def give_back(self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]) -> None: ...

    def read(
        self, scope: str, *, window_seconds: int, index: int, counters: Sequence[str]
    ) -> dict[str, WindowCounts]: ...


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


@dataclass(eq=False)
class RateLimiter:
    counters: RateCounters
    clock: Clock
    policy: RateLimitPolicy
    _: KW_ONLY
    secret: bytes = field(default=b"", repr=False)  # keys the email digests: counters hold no address
    # (scope, window index) -> the counts of the window before it, once it had ended
    _previous: OrderedDict[tuple[str, int], dict[str, int]] = field(default_factory=OrderedDict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def check_caller(self, principal: Principal) -> None:
        """Per key (or user) and per account, both in one item keyed by the account: one
        round trip. A refused request is given back, so a runaway key cannot use up the
        room its account's other keys need."""
        if not self.policy.enabled:
            return
        scope, window, rules = self._caller_rules(principal)
        self._check(scope, window, rules, give_back_refused=True)

    # -- the caller check folded into another write (docs/rate-limits.md, "Folded") ----------
    def caller_gate(self, principal: Principal) -> CallerGate | None:
        """The check of `check_caller` as a condition for another write; None when off."""
        if not self.policy.enabled:
            return None
        scope, window, rules = self._caller_rules(principal)
        at = position(self.clock.now(), window)
        with self._lock:
            known = dict(self._previous.get((scope, at.index), {}))
        # A counter whose previous window is unknown here is taken at its largest value.
        previous = {rule.counter: known.get(rule.counter, rule.limit.requests) for rule in rules}
        exact = all(rule.counter in known for rule in rules)
        return self._gate(scope, window, at.index, at.fraction, tuple(rules), previous, exact=exact)

    def recheck(self, gate: CallerGate, counts: dict[str, WindowCounts]) -> CallerGate:
        """The gated write was refused by the counters, which held `counts` (this request not
        counted). Raises RateLimited when the exact numbers refuse it too; otherwise returns
        the exact gate to write with."""
        previous = {counter: counts[counter].previous for counter in gate.counters}
        self._remember(gate.scope, gate.index, previous)
        refused = [
            (rule, decision)
            for rule in gate.rules
            if not (
                decision := decide(
                    rule.limit,
                    WindowCounts(current=counts[rule.counter].current + 1, previous=previous[rule.counter]),
                    gate.fraction,
                    counted_if_refused=False,
                )
            ).allowed
        ]
        if refused:
            raise _refusal(refused)
        return self._gate(
            gate.scope, gate.window_seconds, gate.index, gate.fraction, gate.rules, previous, exact=True
        )

    def learn(self, gate: CallerGate) -> None:
        """After the answer: read the previous window's final counts if the gate had to assume
        them, so the next requests of this window are checked exactly. Never raises."""
        if gate.exact:
            return
        try:
            counts = self.counters.read(
                gate.scope, window_seconds=gate.window_seconds, index=gate.index, counters=gate.counters
            )
        except Exception:  # only the next request's precision depends on it
            logger.warning("rate limit counts read failed", exc_info=True)
            return
        self._remember(gate.scope, gate.index, {c: counts[c].previous for c in gate.counters})

    def _gate(
        self,
        scope: str,
        window: int,
        index: int,
        fraction: float,
        rules: tuple[Rule, ...],
        previous: dict[str, int],
        *,
        exact: bool,
    ) -> CallerGate:
        maxima = {
            rule.counter: most_counted_before(rule.limit, previous[rule.counter], fraction) for rule in rules
        }
        return CallerGate(scope, window, index, fraction, rules, maxima, exact)

    def _remember(self, scope: str, index: int, previous: dict[str, int]) -> None:
        with self._lock:
            self._previous[(scope, index)] = {**self._previous.get((scope, index), {}), **previous}
            self._previous.move_to_end((scope, index))
            while len(self._previous) > _MAX_REMEMBERED:
                self._previous.popitem(last=False)

    def _caller_rules(self, principal: Principal) -> tuple[str, int, list[Rule]]:
        window = self.policy.window_seconds
        if principal.key_id is not None:
            caller = Rule(f"key:{principal.key_id}", Limit("api_key", self.policy.per_key, window))
        else:
            caller = Rule(f"user:{principal.user_id}", Limit("user", self.policy.per_key, window))
        account = Rule("org", Limit("account", self.policy.per_account, window))
        return f"org#{principal.org_id}", window, [caller, account]

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
        raise _refusal(refused)

    def _digest(self, email: str) -> str:
        return address_digest(self.secret, email)


def address_digest(secret: bytes, email: str) -> str:
    """How counters and locks name an address: a keyed hash, never the address itself."""
    return keyed_hash(secret, normalize_email(email))[:32]


def _refusal(refused: list[tuple[Rule, Decision]]) -> RateLimited:
    rule, decision = max(refused, key=lambda pair: pair[1].retry_after_seconds)
    return RateLimited(
        f"Too many requests ({rule.limit.name} limit: {rule.limit.requests} per "
        f"{rule.limit.window_seconds} s); retry after {decision.retry_after_seconds} s.",
        details={
            "limit": rule.limit.name,
            "max_requests": rule.limit.requests,
            "window_seconds": rule.limit.window_seconds,
        },
        retry_after_seconds=decision.retry_after_seconds,
    )


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
