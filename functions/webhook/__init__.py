"""Delivers results: signed webhooks and bucket delivery (the deliver queue)."""
