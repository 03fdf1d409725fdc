"""presets: see docs/architecture.md (Layout)."""
