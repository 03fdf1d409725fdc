"""The vendor's expiration policies (docs/compat.md, Retention): `expires_after` on a file
or an upload, `output_expires_after` on a batch, `{anchor: "created_at", seconds}` with
`seconds` from 1 hour to 30 days. Each is checked as the vendor's document bounds it, then
refused: this service keeps a batch's results as the org's retention settings say and an
input file until it is deleted, and expires nothing on request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from batchroute.errors import InvalidRequest

ANCHOR: Final = "created_at"
MIN_SECONDS: Final = 3600  # 1 hour
MAX_SECONDS: Final = 2_592_000  # 30 days


def refuse_expiration(value: object, param: str) -> None:
    """Nothing when `value` is None; else a 400 naming the field at fault (`param`,
    `<param>.anchor`, `<param>.seconds`), or for a policy the vendor would take, a 400 on
    `param` saying what keeps files and results instead."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise _invalid(param, f"{param} must be an object {{anchor, seconds}}.")
    unknown = sorted(str(key) for key in value if key not in ("anchor", "seconds"))
    if unknown:
        raise _invalid(f"{param}.{unknown[0]}", f"{param} takes anchor and seconds only.")
    if value.get("anchor") != ANCHOR:
        raise _invalid(f"{param}.anchor", f"{param}.anchor must be {ANCHOR}.")
    seconds = value.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise _invalid(
            f"{param}.seconds",
            f"{param}.seconds must be an integer from {MIN_SECONDS} (1 hour) to {MAX_SECONDS} (30 days).",
        )
    raise InvalidRequest(
        f"{param} is not supported: nothing expires on request here. A batch's output and error "
        "files are kept as the org's retention settings say (GET/PUT /v1/retention-settings); "
        "an input file until it is deleted (DELETE /v1/compat/v1/files/{file_id}).",
        code="expiration_not_supported",
        details={"param": param},
    )


def _invalid(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_request", details={"param": param})
