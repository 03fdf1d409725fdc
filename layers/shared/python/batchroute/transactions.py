"""One write of a DynamoDB TransactWriteItems call (`{"Put": ...}`, `{"Update": ...}`,
`{"ConditionCheck": ...}`), built by an adapter and carried unread by the services and
commands that put one transaction together from several stores' parts (a reservation, a
spending limit's checks, a work order's count). Declared here once for all of them."""

from __future__ import annotations

from typing import Any

TransactItem = dict[str, Any]
