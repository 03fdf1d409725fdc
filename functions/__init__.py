"""Lambda functions: thin handlers over the shared layer (batchroute)."""
