"""compat: see docs/architecture.md (Layout)."""
