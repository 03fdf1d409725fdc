"""How an amount reads in the CLI and in what the SDK shows (docs/money.md): the service's
own rule, tested against the same table (tests/fixtures/money_format.json)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

_CENT = Decimal("0.01")
_MAX_DECIMALS = 6


def money_text(amount: Decimal | str | int, currency: str = "usd") -> str:
    """`12.50 USD`, `10,000.00 USD`; under a cent two significant figures (at most 6
    decimals): `0.0012 USD`. Never an exponent. Text that is not a number is shown as sent."""
    code = currency.upper()
    try:
        value = amount if isinstance(amount, Decimal) else Decimal(str(amount).strip())
    except InvalidOperation:
        return f"{amount} {code}"
    if not value.is_finite():
        return f"{amount} {code}"
    if value and abs(value) < _CENT:
        places = min(_MAX_DECIMALS, max(2, 1 - value.adjusted()))
        rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
        if rounded and abs(rounded) < _CENT:
            return f"{format(rounded.normalize(), 'f')} {code}"
    cents = value.quantize(_CENT, rounding=ROUND_HALF_UP)
    return f"{format(cents if cents else abs(cents), ',.2f')} {code}"
