import type { Money } from "./api/client";

export function money(value: Money | null | undefined): string {
  if (!value) return "—";
  return `${value.amount} ${value.currency.toUpperCase()}`;
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

export const TERMINAL_STATES = ["completed", "failed", "canceled", "expired"];
