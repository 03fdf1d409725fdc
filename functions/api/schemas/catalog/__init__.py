"""catalog: see docs/architecture.md (Layout)."""
