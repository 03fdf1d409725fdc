"""schedules: see docs/architecture.md (Layout)."""
