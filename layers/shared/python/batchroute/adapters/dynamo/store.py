"""What every DynamoDB store shares: its table and a client (the cached one unless injected)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from batchroute.adapters.aws import client
from batchroute.adapters.dynamo.codec import is_condition_failure


class DynamoStore:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client("dynamodb")

    def transact_if(self, items: list[dict[str, Any]]) -> bool:
        """One TransactWriteItems; False when a condition refused it (any other error raises)."""
        try:
            self.dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True
