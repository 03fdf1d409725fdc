"""Presets: the org's named, versioned request templates, and their resolution on every
path that reads items or chat bodies (docs/presets.md)."""
