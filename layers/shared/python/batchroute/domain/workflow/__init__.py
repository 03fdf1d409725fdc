"""workflow: see docs/architecture.md (Layout)."""
