"""Recurring schedules and their golden-set regression runs (docs/schedules.md)."""
