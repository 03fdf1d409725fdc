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
