"""accounts: see docs/architecture.md (Layout)."""
