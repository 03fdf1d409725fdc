"""billing: see docs/architecture.md (Layout)."""
