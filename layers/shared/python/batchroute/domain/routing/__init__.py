"""routing: see docs/architecture.md (Layout)."""
