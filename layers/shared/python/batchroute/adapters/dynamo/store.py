"""What every DynamoDB store shares: its table and a client (the cached one unless injected)."""

from __future__ import annotations

from typing import Any

from batchroute.adapters.aws import client


class DynamoStore:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client("dynamodb")
