"""batches: see docs/architecture.md (Layout)."""
