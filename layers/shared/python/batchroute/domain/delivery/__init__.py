"""delivery: see docs/architecture.md (Layout)."""
