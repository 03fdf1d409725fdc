"""The Uploads API's assembly claim (services/compat/uploads.py, docs/compat.md): it lapses
only after the API function's time-out, so a live call never loses its claim to another."""

from __future__ import annotations

from datetime import timedelta

from batchroute.resources import FUNCTIONS
from batchroute.services.compat.uploads import ASSEMBLY_CLAIM


def test_a_claim_outlasts_the_api_functions_time_out() -> None:
    # Given the API function, which assembles an upload inside one call
    (api,) = [function for function in FUNCTIONS if function.key == "api"]
    # Then a claim lapses only after that call's time-out, by a second at most
    assert (
        timedelta(seconds=api.timeout_seconds) < ASSEMBLY_CLAIM <= timedelta(seconds=api.timeout_seconds + 1)
    )
