"""Batches as the customer sees them: quotes, input files, create, cancel and retry, reads
and their API views (docs/batches.md, docs/files.md, docs/routing.md)."""
