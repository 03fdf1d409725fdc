"""The vendors' published request contracts, as checks: `request_violations(operation, body)` and
the bodies each adapter sends, `outgoing(request, endpoint, lane_max_output_tokens=...)`
(docs/providers.md)."""
