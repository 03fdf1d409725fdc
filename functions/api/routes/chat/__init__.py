"""chat: see docs/architecture.md (Layout)."""
