import type { Money } from "./api/client";

// Money as a person reads it: the one rule of docs/money.md, shared with the service's and the
// CLI's formatters through tests/fixtures/money_format.json (tests/e2e/test_console_money.py).
export function money(value: Money | null | undefined): string {
  if (!value) return "—";
  return moneyText(value.amount, value.currency);
}

/** `12.50 USD`, `10,000.00 USD`; under a cent two significant figures (at most 6 decimals):
 * `0.0012 USD`. Never an exponent. Exact: decimal digits, never a float. */
export function moneyText(amount: string, currency: string): string {
  return `${amountText(amount)} ${currency.toUpperCase()}`;
}

/** The number of `moneyText` alone (a chart's axis and tooltip: `0.0012`, `1,000.00`). */
export function amountText(amount: string): string {
  const parsed = /^\s*(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*$/.exec(amount);
  if (!parsed || `${parsed[2]}${parsed[3] ?? ""}` === "") return amount;
  const fraction = parsed[3] ?? "";
  const units = BigInt(`${parsed[2]}${fraction}` || "0"); // the amount is units x 10^-scale
  const scale = fraction.length - Number(parsed[4] ?? "0");
  const sign = parsed[1] && units !== 0n ? "-" : "";
  if (units !== 0n && compareScaled(units, scale, 1n, 2) < 0) {
    const adjusted = units.toString().length - 1 - scale; // the exponent of the first digit
    const places = Math.min(6, Math.max(2, 1 - adjusted));
    const small = roundTo(units, scale, places);
    if (small !== 0n && compareScaled(small, places, 1n, 2) < 0) {
      const digits = small.toString().padStart(places, "0").replace(/0+$/, "");
      return `${sign}0.${digits}`;
    }
  }
  const cents = roundTo(units, scale, 2).toString().padStart(3, "0");
  const whole = cents.slice(0, -2).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const shown = `${whole}.${cents.slice(-2)}`;
  return `${/[1-9]/.test(shown) ? sign : ""}${shown}`;
}

/** A spend axis from 0 to `top` (USD): at most six ticks a round step apart (1, 2 or 5 times a
 * power of ten), each labelled with as many decimals as the step needs (at least two), so no two
 * labels read the same ("0.005, 0.010, 0.015"), as money rounded to the cent would. */
export function spendAxis(top: number): { ticks: number[]; top: number; label: (value: number) => string } {
  const rough = top > 0 ? top / 4 : 0.01;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((candidate) => candidate >= rough * (1 - 1e-9)) ?? 10 * power;
  const decimals = Math.min(6, Math.max(2, Math.ceil(-Math.log10(step) - 1e-9)));
  const count = Math.max(1, Math.ceil(top / step - 1e-9));
  const ticks = Array.from({ length: count + 1 }, (_, i) => Number((i * step).toFixed(decimals)));
  const label = (value: number) => {
    const [whole = "0", fraction = ""] = value.toFixed(decimals).split(".");
    return `${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}.${fraction}`;
  };
  return { ticks, top: ticks[ticks.length - 1] ?? 0, label };
}

/** `units x 10^-scale` rounded half up to `places` decimals, as units of 10^-places. */
function roundTo(units: bigint, scale: number, places: number): bigint {
  if (scale <= places) return units * 10n ** BigInt(places - scale);
  const divisor = 10n ** BigInt(scale - places);
  return (units + divisor / 2n) / divisor;
}

function compareScaled(a: bigint, aScale: number, b: bigint, bScale: number): number {
  const scale = Math.max(aScale, bScale);
  const left = a * 10n ** BigInt(scale - aScale);
  const right = b * 10n ** BigInt(scale - bScale);
  return left < right ? -1 : left > right ? 1 : 0;
}

/** An amount typed into a money field: digits with at most `decimals` decimals after one
 * point, nothing else (no exponent, sign, separators or currency sign). The message when not. */
export function plainDecimalProblem(text: string, decimals = 6): string | undefined {
  const value = text.trim();
  if (new RegExp(`^\\d+(\\.\\d{1,${decimals}})?$`).test(value)) return undefined;
  return `Plain decimals only, like 1000 or 12.50: no exponent (1e3), commas or signs; at most ${decimals} decimals.`;
}

// The prompt-cache split of an input (docs/ledger.md, "Prompt caching"): of the input tokens,
// those the vendor read from its prompt cache and those it wrote to it, each billed at its own
// price. Shown only when the vendor reported any; a price when the receipt locked one.
export interface CacheSplit {
  cachedRead?: number | null;
  cacheWrite?: number | null;
  cachedReadPrice?: string | null; // USD per million tokens
  cacheWritePrice?: string | null;
}

/** "3000 cached read at 0.0375 USD per million tokens · 200 cache write at 1.00 USD per million
 * tokens"; "" when both are zero. A price is a rate, shown exactly as the API states it, not by
 * the money rule (docs/money.md). */
export function cacheSplitText(split: CacheSplit): string {
  const part = (tokens: number | null | undefined, what: string, price: string | null | undefined) =>
    tokens ? `${tokens} ${what}${price ? ` at ${price} USD per million tokens` : ""}` : "";
  return [
    part(split.cachedRead, "cached read", split.cachedReadPrice),
    part(split.cacheWrite, "cache write", split.cacheWritePrice),
  ]
    .filter(Boolean)
    .join(" · ");
}

// Times: the viewer's own date and time, always followed by the zone they are in
// ("Nov 29, 2026, 08:01 AM UTC", "Nov 29, 2026, 05:01 PM GMT+9"), never a bare clock time.
// The API's times are ISO 8601 in UTC; one formatter shows every one of them (docs/console.md).
const TIME = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  timeZoneName: "short",
});

export function when(value: string | null | undefined): string {
  if (!value) return "—";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : TIME.format(date);
}

const BYTE_UNITS = ["bytes", "KiB", "MiB", "GiB"];

/** A size as people read it: `512 bytes`, `4.0 MiB`, `1.5 GiB` (powers of 1024). */
export function bytes(count: number): string {
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${count} bytes` : `${value.toFixed(1)} ${BYTE_UNITS[unit]}`;
}

export const TERMINAL_STATES = ["completed", "failed", "canceled", "expired"];

/** The item counts every batch view carries. */
export interface ItemCounts {
  total: number;
  completed: number;
  failed: number;
  canceled: number;
}

/** A batch's progress, the one definition every page shows: the items that have ended
 * (completed, failed or canceled) out of all of them. */
export function itemsEnded(counts: ItemCounts): number {
  return counts.completed + counts.failed + counts.canceled;
}

// Settled: terminal and `settled_at` set. A canceled (failed, expired) batch is terminal at
// once, but the work already dispatched may still run; its results, receipt and retry come
// once it is settled, so pages follow a batch until then (docs/console.md, "Cancel").
export function isSettled(batch: { state: string; settled_at?: string | null }): boolean {
  return TERMINAL_STATES.includes(batch.state) && batch.settled_at != null;
}
