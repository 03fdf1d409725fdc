"""batchroute: the shared layer of the batch AI routing service (domain, services, adapters)."""
