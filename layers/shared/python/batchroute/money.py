"""Money: Decimal in code, integer micro-dollars at rest, decimal strings in the API. Never float.

`money_text` is how an amount reads in a message: the one rule of docs/money.md."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, ROUND_UP, Decimal
from typing import TypedDict

MICROS_PER_USD = 1_000_000
_QUANT = Decimal("0.000001")
_CENT = Decimal("0.01")
# An amount typed as text: ASCII digits, then at most one decimal point and digits ("1e3",
# "1,000", "5\n" and other scripts' digits are not what a person means by an amount:
# refused, never guessed). Also the published schemas' pattern.
AMOUNT_TEXT = r"^[0-9]+(\.[0-9]+)?$"
_AMOUNT = re.compile(AMOUNT_TEXT)


def is_amount_text(text: str) -> bool:
    """Whether `text` is an amount as typed (AMOUNT_TEXT, the whole of it)."""
    return _AMOUNT.fullmatch(text) is not None


def is_usd_money(value: Mapping[str, object]) -> bool:
    """Whether an input's object is a USD Money object as GET shows one, so it can be sent
    back: exactly `currency` (usd, in any case) and `amount` (read as the field reads a plain
    amount). The one rule of every USD input, and of the published schemas' `UsdMoney`."""
    return set(value) == {"currency", "amount"} and str(value["currency"]).lower() == "usd"


class MoneyView(TypedDict):
    """Money in the API: a lowercase currency and a decimal-string amount."""

    currency: str
    amount: str


@dataclass(frozen=True, order=True)
class Money:
    micros: int
    currency: str = "usd"

    @classmethod
    def usd(cls, amount: Decimal | str | int) -> Money:
        value = Decimal(str(amount)) if not isinstance(amount, Decimal) else amount
        return cls(int((value * MICROS_PER_USD).to_integral_value(rounding=ROUND_HALF_EVEN)))

    @classmethod
    def usd_ceil(cls, amount: Decimal) -> Money:
        """Round up to the next micro-dollar: used for holds, which must never under-cover."""
        return cls(int((amount * MICROS_PER_USD).to_integral_value(rounding=ROUND_UP)))

    @classmethod
    def zero(cls) -> Money:
        return cls(0)

    @property
    def amount(self) -> Decimal:
        return (Decimal(self.micros) / MICROS_PER_USD).quantize(_QUANT)

    def __add__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.micros + other.micros, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.micros - other.micros, self.currency)

    def _same_currency(self, other: Money) -> None:
        if other.currency != self.currency:
            raise ValueError("currency mismatch")

    def to_api(self) -> MoneyView:
        """The read-model shape: {currency, amount} with a decimal-string amount."""
        return {"currency": self.currency, "amount": format_amount(self.amount)}


def format_amount(value: Decimal) -> str:
    text = format(value.quantize(_QUANT), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
        if "." not in text:
            text += ".00"
        elif len(text.split(".")[1]) == 1:
            text += "0"
    return text


def money_text(value: Money | Decimal | int, currency: str = "usd") -> str:
    """An amount as a person reads it (docs/money.md): `12.50 USD`, `10,000.00 USD`; an amount
    under a cent with two significant figures (at most 6 decimals): `0.0012 USD`. Never an exponent."""
    if isinstance(value, Money):
        return money_text(value.amount, value.currency)
    amount = Decimal(value)
    if amount and abs(amount) < _CENT:
        decimals = min(6, max(2, 1 - amount.adjusted()))
        small = amount.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
        if small and abs(small) < _CENT:
            return f"{format(small.normalize(), 'f')} {currency.upper()}"
    cents = amount.quantize(_CENT, rounding=ROUND_HALF_UP)
    return f"{format(cents if cents else abs(cents), ',.2f')} {currency.upper()}"
