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
