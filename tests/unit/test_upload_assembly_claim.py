"""The Uploads API's assembly claim (services/compat/uploads.py, docs/compat.md): it lapses
only after the time-out of the function that serves the compat routes (`api-stream`), so a
live call never loses its claim to another."""

from __future__ import annotations

from datetime import timedelta

from batchroute.resources import STREAM_TIMEOUT_SECONDS
from batchroute.services.compat.uploads import ASSEMBLY_CLAIM


def test_a_claim_outlasts_the_streaming_functions_time_out() -> None:
    # Given the streaming function, which serves the compat routes and assembles an upload
    # inside one call
    limit = timedelta(seconds=STREAM_TIMEOUT_SECONDS)
    # Then a claim lapses only after that call's time-out, by a second at most
    assert limit < ASSEMBLY_CLAIM <= limit + timedelta(seconds=1)
