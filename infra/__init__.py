"""CDK infrastructure for batchroute: one stack per environment, built from batchroute.resources."""
