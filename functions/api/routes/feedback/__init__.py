"""feedback: see docs/architecture.md (Layout)."""
