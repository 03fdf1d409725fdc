"""Getting results to the customer: signed webhooks with retries (docs/webhooks.md)."""
