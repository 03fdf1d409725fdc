"""work_orders: see docs/architecture.md (Layout)."""
