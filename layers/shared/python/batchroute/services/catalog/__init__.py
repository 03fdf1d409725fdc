"""What can be bought and how it is doing: the public catalog, lane health and heartbeats,
content (changelog, posts) and runtime metadata (docs/catalog.md)."""
