"""Scheduled sweeper (EventBridge): SLA expiry and, later, retention and stale holds."""
