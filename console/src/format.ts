import type { Money } from "./api/client";

export function money(value: Money | null | undefined): string {
  if (!value) return "—";
  return `${value.amount} ${value.currency.toUpperCase()}`;
}

export function when(value: string | null | undefined): string {
  if (!value) return "—";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString();
}

export const TERMINAL_STATES = ["completed", "failed", "canceled", "expired"];

// Settled: terminal and `settled_at` set. A canceled (failed, expired) batch is terminal at
// once, but the work already dispatched may still run; its results, receipt and retry come
// once it is settled, so pages follow a batch until then (docs/console.md, "Cancel").
export function isSettled(batch: { state: string; settled_at?: string | null }): boolean {
  return TERMINAL_STATES.includes(batch.state) && batch.settled_at != null;
}
