"""Request and response models: batches. Create (202, already priced, credits reserved from
the quote), list, read, items, results, the artifact link, cancel and retry (docs/batches.md).

The create and cancel bodies are read by the batch service, which answers each problem in its
own words (see ServiceValidatedBody): an Idempotency-Key replay is answered before the body is
looked at, so no field may be refused by pydantic first.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, SkipValidation

from batchroute.domain.metadata import MAX_KEY_CHARS, MAX_METADATA_PAIRS, MAX_VALUE_CHARS
from batchroute.services.batches.create import MAX_CANCEL_REASON
from functions.api.schemas.common import ServiceValidatedBody
from functions.api.schemas.quotes import ItemsToQuote

Metadata = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=MAX_KEY_CHARS)],
        Annotated[str, Field(max_length=MAX_VALUE_CHARS)] | float | bool,
    ],
    Field(
        max_length=MAX_METADATA_PAIRS,
        description=f"Your key-value pairs, echoed on the batch: at most {MAX_METADATA_PAIRS}; keys "
        f"1-{MAX_KEY_CHARS} characters; values strings of at most {MAX_VALUE_CHARS} characters "
        "(numbers and booleans are kept as their text)",
    ),
]


# -- requests ----------------------------------------------------------------------------
class BatchCreateRequest(ItemsToQuote):
    """A batch: from a quote (its locked prices; its own items when none are given) or priced
    now from `items` or `input_file_id`. Needs the Idempotency-Key header; unknown fields are
    refused."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    quote_id: SkipValidation[str | None] = Field(
        default=None, description="A quote (`qlock_...`) not yet expired, of the same items"
    )
    metadata: SkipValidation[Metadata | None] = None
    completion_window: SkipValidation[Literal["24h"]] = Field(
        default="24h", description="Every batch has one 24-hour SLA"
    )


class CancelRequest(ServiceValidatedBody):
    """Optional: why the batch is canceled."""

    reason: SkipValidation[Annotated[str, Field(max_length=MAX_CANCEL_REASON)] | None] = None
