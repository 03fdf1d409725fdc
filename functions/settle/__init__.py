"""Finalizes and settles batches (the settle queue)."""
