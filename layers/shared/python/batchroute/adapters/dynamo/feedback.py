"""Feedback in the `controls` table (docs/feedback.md).

| Item | pk / sk |
|---|---|
| feedback (one per target and author) | `ORG#<org>` / `FEEDBACK#<target key>#<author>` |
| daily counter per model and provider | `ORG#<org>` / `FBSUM#D#<day>#<model>#<provider>` |

A feedback item is on the org's `gsi1` partition `FEEDBACK#<org>` sorted by
`<updated_at>#<id>` (the listing, newest first). It is written with its counter moves in ONE
transaction, conditional on its version, so the counters always equal the feedback they
count. The summary is one `Query` over a range of counters; a batch's feedback one `Query`
on `begins_with(sk, "FEEDBACK#bi#<batch_id>#")`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import asdict
from itertools import islice
from typing import Any

from batchroute.adapters.dynamo.codec import (
    from_item,
    org_item,
    org_key,
    org_pk,
    plain,
    to_value,
    update_request,
)
from batchroute.adapters.dynamo.reads import day_range_query, pages, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.feedback.feedback import LABEL_PREFIX, CounterKey, Feedback, FeedbackCounter, Target
from batchroute.domain.stored import from_counters, from_stored

PREFIX = "FEEDBACK#"
COUNTER_PREFIX = "FBSUM#D#"


class BadCursor(ValueError):
    pass


def _sk(target: Target, author: str) -> str:
    return f"{PREFIX}{target.key}#{author}"


def _counter_sk(key: CounterKey) -> str:
    day, model, provider = key
    return f"{COUNTER_PREFIX}{day}#{model}#{provider}"


class FeedbackStore(DynamoStore):
    def get(self, org_id: str, target: Target, author: str) -> Feedback | None:
        return self.read_at(org_key(org_id, _sk(target, author)), feedback_from_item)

    def save(
        self, feedback: Feedback, moves: Mapping[CounterKey, Mapping[str, int]], *, replaces: int | None
    ) -> bool:
        """Write `feedback` and move the counters, in one transaction; `replaces`: the version
        it replaces (None: a new one). False when someone else wrote it meanwhile."""
        items: list[dict[str, Any]] = [{"Put": self.versioned_put(_feedback_item(feedback), replaces)}]
        for key, deltas in moves.items():
            names = {f"#c{i}": name for i, name in enumerate(deltas)}
            values: dict[str, object] = {f":c{i}": n for i, n in enumerate(deltas.values())}
            values.update({":day": key[0], ":model": key[1], ":provider": key[2]})
            items.append(
                {
                    "Update": update_request(
                        self.table_name,
                        org_key(feedback.org_id, _counter_sk(key)),
                        "SET #day = :day, #model = :model, #provider = :provider ADD "
                        + ", ".join(f"#c{i} :c{i}" for i in range(len(deltas))),
                        names={**names, "#day": "day", "#model": "model", "#provider": "provider"},
                        values=values,
                    )
                }
            )
        return self.transact(items)

    def page(
        self, org_id: str, *, cursor: str | None, limit: int, filters: Mapping[str, str]
    ) -> tuple[list[Feedback], str | None]:
        """Newest first; `filters` are equalities on stored attributes (target_type,
        batch_id, model, provider, rating_scale). Raises BadCursor."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": to_value(f"FEEDBACK#{org_id}")},
            "ScanIndexForward": False,
            "Limit": limit + 1,  # one more than the page: a cursor only when a row follows it
        }
        if filters:
            names = {f"#f{i}": name for i, name in enumerate(filters)}
            kwargs["FilterExpression"] = " AND ".join(f"#f{i} = :f{i}" for i in range(len(filters)))
            kwargs["ExpressionAttributeNames"] = names
            kwargs["ExpressionAttributeValues"].update(
                {f":f{i}": to_value(v) for i, v in enumerate(filters.values())}
            )
        if cursor is not None:
            kwargs["ExclusiveStartKey"] = _decode(cursor, org_id)
        found: list[Feedback] = []
        # a filtered page reads at most ten index pages
        for response in islice(pages(self.dynamodb.query, kwargs), 10):
            found.extend(feedback_from_item(from_item(i)) for i in response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if len(found) > limit:
                break
            if last is None:
                return found, None
        if len(found) <= limit:  # ten index pages read without filling the page: go on from there
            return found, _encode(last)
        found = found[:limit]
        tail = found[-1]
        return found, _encode(
            {
                "pk": {"S": org_pk(org_id)},
                "sk": {"S": _sk(tail.target, tail.author)},
                "gsi1pk": {"S": f"FEEDBACK#{org_id}"},
                "gsi1sk": {"S": _gsi1sk(tail)},
            }
        )

    def for_batch(self, org_id: str, batch_id: str) -> list[Feedback]:
        request = prefix_query(self.table_name, org_pk(org_id), f"{PREFIX}bi#{batch_id}#")
        return [feedback_from_item(item) for item in self.query_all(request)]

    def counters_between(self, org_id: str, first_day: str, last_day: str) -> list[FeedbackCounter]:
        request = day_range_query(self.table_name, org_pk(org_id), COUNTER_PREFIX, first_day, last_day)
        return [counter_from_item(item) for item in self.query_all(request)]


def _gsi1sk(feedback: Feedback) -> str:
    return f"{feedback.updated_at}#{feedback.feedback_id}"


def _encode(key: Mapping[str, Any]) -> str:
    plain = {"sk": key["sk"]["S"], "gsi1sk": key["gsi1sk"]["S"]}
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode(cursor: str, org_id: str) -> dict[str, Any]:
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        sk, gsi1sk = str(plain["sk"]), str(plain["gsi1sk"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise BadCursor(cursor) from exc
    if not sk.startswith(PREFIX):
        raise BadCursor(cursor)
    return {
        "pk": {"S": org_pk(org_id)},
        "sk": {"S": sk},
        "gsi1pk": {"S": f"FEEDBACK#{org_id}"},
        "gsi1sk": {"S": gsi1sk},
    }


def _feedback_item(feedback: Feedback) -> dict[str, Any]:
    target = feedback.target
    values = asdict(feedback)
    del values["target"]  # stored flat: its type and ids beside the feedback's own fields
    return {
        **org_item(feedback.org_id, _sk(target, feedback.author), "feedback"),
        "gsi1pk": f"FEEDBACK#{feedback.org_id}",
        "gsi1sk": _gsi1sk(feedback),
        **values,
        "target_type": target.type,
        "batch_id": target.batch_id,
        "customer_item_id": target.customer_item_id,
        "completion_id": target.completion_id,
    }


def counter_from_item(item: Mapping[str, Any]) -> FeedbackCounter:
    """A daily counter item: its figures, and each label's under `label:<label>`."""
    labels = {
        str(name).removeprefix(LABEL_PREFIX): int(value or 0)
        for name, value in item.items()
        if str(name).startswith(LABEL_PREFIX)
    }
    model, provider = str(item.get("model") or ""), str(item.get("provider") or "")
    return from_counters(FeedbackCounter, item, model=model, provider=provider, labels=labels)


def feedback_from_item(item: Mapping[str, Any]) -> Feedback:
    if item["target_type"] == "batch_item":
        target = Target(
            "batch_item", batch_id=str(item["batch_id"]), customer_item_id=str(item["customer_item_id"])
        )
    else:
        target = Target("chat_completion", completion_id=str(item["completion_id"]))
    return from_stored(
        Feedback,
        plain(item),
        target=target,
        labels=tuple(item.get("labels") or ()),
    )
