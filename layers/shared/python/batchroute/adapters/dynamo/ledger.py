"""The prepaid wallet of each org and its append-only ledger.

Balances are integer micro-dollars. Every change to a wallet is written in the same
transaction as the ledger entry that explains it, so the entries always add up to the
balance.
"""

from __future__ import annotations

from typing import Any

from batchroute.adapters.dynamo.codec import from_item, to_item, to_value
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.ids import new_id
from batchroute.money import Money

TransactItem = dict[str, Any]


def _wallet_key(org_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"WALLET#{org_id}"}, "sk": {"S": "META"}}


class LedgerStore(DynamoStore):
    def _entry_item(
        self, org_id: str, *, kind: str, amount: Money, at: str, memo: str, actor: str | None
    ) -> TransactItem:
        entry_id = new_id("evt")
        values = {
            "pk": f"WALLET#{org_id}",
            "sk": f"ENTRY#{entry_id}",
            "kind": "ledger_entry",
            "entry_id": entry_id,
            "entry_type": kind,
            "amount_micros": amount.micros,
            "currency": amount.currency,
            "memo": memo,
            "actor": actor,
            "created_at": at,
        }
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": to_item(values),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def open_wallet_items(self, org_id: str, *, signup_credit: Money, at: str) -> list[TransactItem]:
        """Items that open an org's wallet (with its signup credit), for the account transaction."""
        wallet = {
            "pk": f"WALLET#{org_id}",
            "sk": "META",
            "kind": "wallet",
            "org_id": org_id,
            "currency": signup_credit.currency,
            "balance_micros": signup_credit.micros,
            "reserved_micros": 0,
            "created_at": at,
        }
        items: list[TransactItem] = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": to_item(wallet),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        ]
        if signup_credit.micros > 0:
            items.append(
                self._entry_item(
                    org_id,
                    kind="signup_credit",
                    amount=signup_credit,
                    at=at,
                    memo="signup credit",
                    actor="system",
                )
            )
        return items

    def grant(self, org_id: str, amount: Money, *, at: str, memo: str, actor: str) -> Money:
        """Add credits to an existing wallet with a ledger entry; returns the new balance."""
        if amount.micros <= 0:
            raise ValueError("a grant must be positive")
        self.dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": self.table_name,
                        "Key": _wallet_key(org_id),
                        "UpdateExpression": "SET balance_micros = balance_micros + :amount",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeValues": {":amount": to_value(amount.micros)},
                    }
                },
                self._entry_item(org_id, kind="grant", amount=amount, at=at, memo=memo, actor=actor),
            ]
        )
        return self.balance(org_id)

    def balance(self, org_id: str) -> Money:
        """Spendable credit: the balance less what is reserved for running work."""
        wallet = self.wallet(org_id)
        if wallet is None:
            return Money.zero()
        return Money(int(wallet["balance_micros"]) - int(wallet.get("reserved_micros", 0)))

    def wallet(self, org_id: str) -> dict[str, Any] | None:
        response = self.dynamodb.get_item(
            TableName=self.table_name, Key=_wallet_key(org_id), ConsistentRead=True
        )
        return from_item(response["Item"]) if "Item" in response else None

    def entries(self, org_id: str, limit: int = 100) -> list[dict[str, Any]]:
        response = self.dynamodb.query(
            TableName=self.table_name,
            KeyConditionExpression="pk = :p AND begins_with(sk, :e)",
            ExpressionAttributeValues={":p": to_value(f"WALLET#{org_id}"), ":e": to_value("ENTRY#")},
            ScanIndexForward=False,
            Limit=limit,
        )
        return [from_item(i) for i in response.get("Items", [])]
