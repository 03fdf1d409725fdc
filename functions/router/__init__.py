"""Routes batches and runs lanes (the route and lanes queues)."""
