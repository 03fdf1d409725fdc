"""Request and response models of the public API, grouped by area."""
