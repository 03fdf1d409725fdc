"""What the request bodies of the service's own resources share: refusing unknown fields and
naming the offending field (`details.field`, a path such as `target.id` or `labels[2]`)."""

from __future__ import annotations

from typing import Final

from batchroute.errors import InvalidRequest

# The Idempotency-Key header's length, characters inclusive (the spec's Limits): checked by
# services/batches/create.py `check_idempotency_key`, documented by functions/api/openapi.py.
IDEMPOTENCY_KEY_LENGTH: Final = (8, 128)


def invalid(path: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_request", details={"field": path})


def unknown_fields_error(unknown: list[str]) -> InvalidRequest:
    """The refusal of unknown fields (sorted): the first in `details.field`, all in `fields`."""
    return InvalidRequest(
        f"Unknown field(s): {', '.join(unknown)}.",
        code="invalid_request",
        details={"field": unknown[0], "fields": unknown},
    )
