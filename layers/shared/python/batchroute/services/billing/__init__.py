"""Billing: what an org may spend and what it is told: billing controls and their audit,
funding checks at submit, limit and balance alerts, rate limiting, retention settings
(docs/billing-controls.md, docs/ledger.md, docs/rate-limits.md)."""
