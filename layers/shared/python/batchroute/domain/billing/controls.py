"""Billing controls of an org (spend limit, alerts) and the audit entries of their changes.

Pure rules: parsing a partial update (only given fields change, `null` clears a nullable
field, money as plain USD numbers), merging it into the stored controls, and the diff the
audit entry keeps. The spend-limit enforcement itself comes with batch submission.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, TypedDict, cast, get_args

from batchroute.domain.views import view_of
from batchroute.errors import Conflict, InvalidRequest
from batchroute.money import Money, MoneyView, is_amount_text, is_usd_money, money_text

Period = Literal["daily", "monthly"]
Mode = Literal["soft", "hard"]
ThresholdType = Literal["balance_below", "spend_above", "pct_of_limit"]
PERIODS: tuple[str, ...] = get_args(Period)
MODES: tuple[str, ...] = get_args(Mode)
THRESHOLD_TYPES: tuple[str, ...] = get_args(ThresholdType)

ACTION_UPDATE = "billing_controls.update"
MAX_THRESHOLDS = 20
MAX_USD = Decimal(1_000_000_000)
MAX_USD_DECIMALS = 6

_ZONE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$")
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


class ConcurrentUpdate(Conflict):
    """Someone else saved in between; the caller re-reads and retries."""

    default_code = "concurrent_update"


class ThresholdView(TypedDict):
    type: ThresholdType
    value: MoneyView | int | None  # Money for the USD types, a whole percent for pct_of_limit


class ControlsSettingsView(TypedDict, total=False):
    """The editable fields in their API shape; an audit entry's before/after hold those that changed."""

    limit_enabled: bool
    limit_period: Period | None
    limit_amount: MoneyView | None
    limit_mode: Mode
    limit_timezone: str
    low_balance_amount: MoneyView | None
    alert_thresholds: list[ThresholdView]
    alert_email_enabled: bool
    alert_webhook_enabled: bool


class ControlsView(ControlsSettingsView):
    org_id: str
    configured: bool
    created_at: str | None
    updated_at: str | None


@dataclass(frozen=True)
class Threshold:
    type: ThresholdType
    amount: Money | None = None  # balance_below, spend_above
    percent: int | None = None  # pct_of_limit

    def to_api(self) -> ThresholdView:
        value = self.percent if self.type == "pct_of_limit" else _money_api(self.amount)
        return {"type": self.type, "value": value}


@dataclass(frozen=True, kw_only=True)
class ControlsSettings:
    """The editable fields of the billing controls, and their defaults."""

    limit_enabled: bool = False
    limit_period: Period | None = None
    limit_amount: Money | None = None
    limit_mode: Mode = "soft"
    limit_timezone: str = "UTC"
    low_balance_amount: Money | None = None
    alert_thresholds: tuple[Threshold, ...] = ()
    alert_email_enabled: bool = True
    alert_webhook_enabled: bool = False


EDITABLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ControlsSettings))


@dataclass(frozen=True, kw_only=True)
class BillingControls(ControlsSettings):
    org_id: str
    configured: bool = False
    created_at: str | None = None
    updated_at: str | None = None
    version: int = 0  # optimistic concurrency; not part of the API

    def to_api(self) -> ControlsView:
        return {
            "org_id": self.org_id,
            "configured": self.configured,
            **self.settings_api(),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    def settings_api(self) -> ControlsSettingsView:
        """The editable fields in their API shape (what the audit diff compares)."""
        return view_of(
            self,
            ControlsSettingsView,
            limit_amount=_money_api(self.limit_amount),
            low_balance_amount=_money_api(self.low_balance_amount),
            alert_thresholds=[t.to_api() for t in self.alert_thresholds],
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class UpdateControls(ControlsSettings):
    """A partial update of the controls, validated at the edge (functions/api/schemas/billing/controls.py):
    only the fields named in `given` change; null clears a nullable one."""

    given: frozenset[str]


@dataclass(frozen=True)
class ControlsChange:
    controls: BillingControls
    needs_save: bool
    before: ControlsSettingsView = field(default_factory=lambda: ControlsSettingsView())  # what changed
    after: ControlsSettingsView = field(default_factory=lambda: ControlsSettingsView())


# -- parsing: the rules of the request model's fields (functions/api/schemas/billing/controls.py) --
def parse_usd(value: Any, name: str, *, ceiling: Decimal = MAX_USD, too_large: str | None = None) -> Money:
    """A plain USD amount (number or decimal string; a Money object is also taken, so what
    GET returns can be sent back): non-negative, at most 6 decimals, at most `ceiling` (1e9,
    or the caller's own bound, with its own `too_large` message, so an absurd amount is told
    the bound that applies)."""
    if isinstance(value, Mapping):
        if not is_usd_money(value):
            raise _invalid(name, f"{name} must be a USD amount (a number, or {{currency: usd, amount}}).")
        value = value["amount"]
    amount = _decimal(value, name)
    if amount < 0:
        raise _invalid(name, f"{name} must not be negative.")
    if amount > ceiling:
        raise _invalid(name, too_large or f"{name} must be at most {money_text(Money.usd(ceiling))}.")
    exponent = amount.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > MAX_USD_DECIMALS:
        raise _invalid(name, f"{name} may have at most {MAX_USD_DECIMALS} decimal places.")
    return Money.usd(amount)


def _decimal(value: Any, name: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise _invalid(name, f"{name} must be a number of USD dollars.")
    if isinstance(value, str) and (not value.strip() or len(value) > 40):
        raise _invalid(name, f"{name} must be a number of USD dollars.")
    if isinstance(value, str) and not is_amount_text(value.strip()):
        # "1e3", "1,000" or "-0" is not an amount as typed (money.AMOUNT_TEXT, the published
        # schemas' pattern, once the spaces around it are trimmed: docs/money.md): refused,
        # never guessed.
        raise _invalid(name, f"{name} must be a plain decimal number of USD dollars, like 1000 or 12.50.")
    try:
        # str() first: a float becomes its shortest decimal spelling (0.1 -> "0.1").
        amount = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
    except InvalidOperation as exc:
        raise _invalid(name, f"{name} must be a number of USD dollars.") from exc
    if not amount.is_finite():
        raise _invalid(name, f"{name} must be a finite number.")
    return amount


def parse_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(name, f"{name} must be true or false.")
    return value


def parse_optional_usd(value: Any, name: str) -> Money | None:
    return None if value is None else parse_usd(value, name)


def parse_period(value: Any, name: str) -> Period | None:
    if value is None:
        return None
    if value not in PERIODS:
        raise _invalid(name, f"{name} must be one of {', '.join(PERIODS)} (or null).")
    return value  # type: ignore[no-any-return]


def parse_mode(value: Any, name: str) -> Mode:
    if value not in MODES:
        raise _invalid(name, f"{name} must be one of {', '.join(MODES)}.")
    return value  # type: ignore[no-any-return]


def parse_timezone(value: Any, name: str) -> str:
    if not is_valid_timezone(value):
        raise _invalid(name, f"{name} must be an IANA time zone such as 'UTC' or 'Europe/Berlin'.")
    return str(value)


def is_valid_timezone(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > 64 or not _ZONE_NAME.match(value) or value in _NOT_ZONES:
        return False
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def parse_thresholds(value: Any, name: str) -> tuple[Threshold, ...]:
    if value is None:
        return ()  # null clears, like []
    if not isinstance(value, list):
        raise _invalid(name, f"{name} must be an array of {{type, value}}.")
    if len(value) > MAX_THRESHOLDS:
        raise _invalid(name, f"{name} may hold at most {MAX_THRESHOLDS} entries.")
    parsed: list[Threshold] = []
    for i, entry in enumerate(value):
        path = f"{name}[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"type", "value"}:
            raise _invalid(path, f"{path} must be an object with exactly 'type' and 'value'.")
        kind = entry["type"]
        if kind not in THRESHOLD_TYPES:
            raise _invalid(f"{path}.type", f"{path}.type must be one of {', '.join(THRESHOLD_TYPES)}.")
        if kind == "pct_of_limit":
            threshold = Threshold(type="pct_of_limit", percent=_percent(entry["value"], f"{path}.value"))
        else:
            threshold = Threshold(type=kind, amount=parse_usd(entry["value"], f"{path}.value"))
        if threshold in parsed:
            raise _invalid(path, f"{path} repeats an earlier threshold.")
        parsed.append(threshold)
    return tuple(parsed)


def _percent(value: Any, name: str) -> int:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or not 0 <= value <= 100:
        raise _invalid(name, f"{name} must be a whole percent from 0 to 100.")
    return int(value)


# -- applying --------------------------------------------------------------------------------
def apply_update(current: BillingControls, command: UpdateControls, *, at: str) -> ControlsChange:
    """Merge the given fields into the stored controls and enforce the cross-field rules."""
    given = command.given
    staged = replace(current, **{name: getattr(command, name) for name in EDITABLE_FIELDS if name in given})
    if "limit_enabled" in given and not command.limit_enabled:
        # "{limit_enabled: false} removes the limit": forget its period and amount too, and
        # its mode (a new limit starts soft), unless this same request stages new ones. A
        # mode staged while the limit is off is then kept when the limit is turned on.
        staged = replace(
            staged,
            limit_period=command.limit_period if "limit_period" in given else None,
            limit_amount=command.limit_amount if "limit_amount" in given else None,
            limit_mode=command.limit_mode if "limit_mode" in given else "soft",
        )
    if staged.limit_enabled:
        missing = [name for name in ("limit_period", "limit_amount") if getattr(staged, name) is None]
        if missing:
            raise _invalid(
                missing[0],
                "An enabled limit needs both limit_period and limit_amount (given now or saved before).",
                missing=missing,
            )
    updated = replace(staged, configured=True, created_at=current.created_at or at, updated_at=at)
    old, new = current.settings_api(), updated.settings_api()
    changed = {name for name, value in old.items() if new.get(name) != value}
    if not changed and current.configured:
        return ControlsChange(controls=current, needs_save=False)
    return ControlsChange(
        controls=updated, needs_save=True, before=_only(old, changed), after=_only(new, changed)
    )


def _only(view: ControlsSettingsView, names: set[str]) -> ControlsSettingsView:
    return cast(ControlsSettingsView, {name: value for name, value in view.items() if name in names})


def _money_api(money: Money | None) -> MoneyView | None:
    return money.to_api() if money is not None else None


def _invalid(name: str | None, message: str, **extra: Any) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_controls", details={"field": name, **extra})
