"""The vendor-compatible file, batch and upload API under /v1/compat/v1: ordinary batches in
the vendor's shapes (docs/compat.md)."""
