"""Recurring schedules in the `controls` table (docs/schedules.md).

| Item | pk / sk |
|---|---|
| schedule (current version, state, exclusions) | `ORG#<org>` / `SCHEDULE#<id>` |
| version (frozen definition) | `SCHEDULE#<id>` / `VERSION#<v, 6 digits>` |
| run (one firing) | `SCHEDULE#<id>` / `RUN#<fire time>` |
| regression run (golden set, per lane) | `SCHEDULE#<id>` / `BENCH#<v, 6 digits>#<regression id>` |
| purge marker (a deleted schedule's history left to purge) | `SCHEDULE#<id>` / `PURGE` |

An active schedule sits on the sparse due index `gsi1` (`SCHEDULE#DUE` / `<next_fire_at>#<id>`);
a paused one drops off it. A schedule and its version are written in one transaction. Every
write of the schedule item adds one to its `revision` (a change, a pause or resume, a fire, a
regression's exclusions), and a write of the whole item is conditional on the revision it
was read at, so it never undoes a write that came in between.
A run is created once per fire time (`attribute_not_exists`), so a duplicated trigger finds it.
A schedule's delete puts its purge marker on `gsi1` (`SCHEDULE#PURGE` / `<purge at>#<id>`) in
the same transaction, so its history is purged however the delete ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, cast

from botocore.exceptions import ClientError

from batchroute.adapters.dynamo.codec import (
    EXISTS,
    decimals,
    delete_request,
    from_item,
    plain,
    put_request,
    set_update,
    to_item,
    to_value,
    with_floats,
)
from batchroute.adapters.dynamo.reads import index_due, pages, prefix_query, raw_items
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import (
    conditional_transaction,
    conditional_update,
    put_new,
    refused_by,
    transact_unless_refused,
)
from batchroute.domain.presets.golden_sets import RegressionRecord
from batchroute.domain.schedules.schedules import (
    InputSource,
    LaneExclusion,
    Schedule,
    ScheduleRun,
    ScheduleVersion,
)
from batchroute.domain.stored import from_stored
from batchroute.transactions import TransactItem

DUE = "SCHEDULE#DUE"
PURGE_DUE = "SCHEDULE#PURGE"  # deleted schedules whose history is left to purge
_PURGE_SK = "PURGE"
_PREFIX = "SCHEDULE#"
_RECORD_FIELDS = tuple(Schedule.__dataclass_fields__)


# An update of the schedule item counts itself in its revision (see the module's docstring).
_REVISED = "revision = if_not_exists(revision, :zero) + :one"
_ONE_MORE = {":zero": 0, ":one": 1}


def _key(org_id: str, schedule_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": f"{_PREFIX}{schedule_id}"}}


def _count_key(org_id: str) -> dict[str, Any]:
    """The org's count of schedules (`MAX_SCHEDULES_PER_ORG`)."""
    return {"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": "SCHEDULES"}}


def version_sk(version: int) -> str:
    return f"VERSION#{version:06d}"


def _item(schedule: Schedule) -> dict[str, Any]:
    values: dict[str, Any] = {
        "pk": f"ORG#{schedule.org_id}",
        "sk": f"{_PREFIX}{schedule.schedule_id}",
        "kind": "schedule",
        **{name: getattr(schedule, name) for name in _RECORD_FIELDS},
        "input_source": schedule.input_source.to_api(),
        "batch_options": dict(schedule.batch_options),
        "exclusions": {k: dict(v) for k, v in (schedule.exclusions or {}).items()},
    }
    if schedule.state == "active" and schedule.next_fire_at:
        values["gsi1pk"] = DUE
        values["gsi1sk"] = f"{schedule.next_fire_at}#{schedule.schedule_id}"
    return dict(decimals(values))


def schedule_from_item(item: Mapping[str, Any]) -> Schedule:
    values: dict[str, Any] = {name: item.get(name) for name in _RECORD_FIELDS}
    values["version"] = int(item["version"])
    values["revision"] = int(item.get("revision") or 0)  # an item written before revisions: 0
    values["input_source"] = InputSource.from_item(item["input_source"])
    values["batch_options"] = plain(item.get("batch_options") or {})
    values["golden_set"] = with_floats(plain(item["golden_set"])) if item.get("golden_set") else None
    values["exclusions"] = with_floats(plain(item.get("exclusions") or {}))
    return Schedule(**values)


class ScheduleStore(DynamoStore):
    # -- schedules -------------------------------------------------------------------------
    def create(self, schedule: Schedule, *, limit: int) -> bool:
        """The schedule, its first version and one more in the org's count, at once; False
        (nothing written) when the org keeps `limit` schedules already."""
        return transact_unless_refused(
            self.dynamodb,
            [
                self.count_up(_count_key(schedule.org_id), limit=limit),
                put_new(self.table_name, _item(schedule)),
                self._version_put(schedule),
            ],
            0,
        )

    def replace(self, schedule: Schedule, *, new_version: bool) -> bool:
        """Overwrite the schedule if nothing wrote it since it was read at `schedule.revision`
        (with a new version's snapshot when `new_version`); False when something did."""
        put = {
            "Put": put_request(
                self.table_name,
                to_item({**_item(schedule), "revision": schedule.revision + 1}),
                condition="attribute_exists(pk) AND (attribute_not_exists(revision) OR revision = :seen)",
                values={":seen": schedule.revision},
            )
        }
        items = [put, self._version_put(schedule)] if new_version else [put]
        return conditional_transaction(self.dynamodb, TransactItems=items)

    def _version_put(self, schedule: Schedule) -> dict[str, Any]:
        version = ScheduleVersion.of(schedule)
        values = {
            "pk": f"{_PREFIX}{schedule.schedule_id}",
            "sk": version_sk(version.version),
            **decimals(asdict(version)),
        }
        return put_new(self.table_name, values)

    def get(self, org_id: str, schedule_id: str) -> Schedule | None:
        return self.read_at(_key(org_id, schedule_id), schedule_from_item)

    def for_org(
        self, org_id: str, *, limit: int, start_after: str | None
    ) -> tuple[list[Schedule], str | None]:
        """An org's schedules, oldest first (ids sort by time); the cursor is the last id."""
        start = f"{_PREFIX}{start_after}" if start_after else None
        request = prefix_query(self.table_name, f"ORG#{org_id}", _PREFIX, start_sk=start, Limit=limit + 1)
        found: list[Schedule] = []
        for response in pages(self.dynamodb.query, request):
            found.extend(schedule_from_item(from_item(i)) for i in response.get("Items", []))
            if len(found) > limit:
                break
        page = found[:limit]
        return page, (page[-1].schedule_id if len(found) > limit else None)

    def delete(self, org_id: str, schedule_id: str, *, purge_at: str) -> bool:
        """The schedule gone, one less in the org's count and its history marked for the purge
        due at `purge_at`, at once; False when there is no such schedule. One made before
        schedules were counted (the count already at 0) is deleted without the count."""
        remove = {"Delete": delete_request(self.table_name, _key(org_id, schedule_id), condition=EXISTS)}
        marker = {"Put": put_request(self.table_name, to_item(_purge_marker(org_id, schedule_id, purge_at)))}
        try:
            self.dynamodb.transact_write_items(
                TransactItems=[remove, self.count_down(_count_key(org_id)), marker]
            )
        except ClientError as exc:
            if refused_by(exc, 0):
                return False
            if refused_by(exc, 1):
                return self.transact([remove, marker])
            raise
        return True

    def advance(self, schedule: Schedule, *, fired_at: str, next_fire_at: str | None) -> bool:
        """Move an active schedule past a fire (conditional on the fire it was due for)."""
        changes: dict[str, object] = {":last": fired_at, ":seen": schedule.next_fire_at, **_ONE_MORE}
        expression = f"SET last_fire_at = :last, {_REVISED}"
        if next_fire_at is None:
            expression += ", next_fire_at = :none REMOVE gsi1pk, gsi1sk"
            changes[":none"] = None
        else:
            expression += ", next_fire_at = :next, gsi1pk = :due, gsi1sk = :sort"
            changes[":next"] = next_fire_at
            changes[":due"] = DUE
            changes[":sort"] = f"{next_fire_at}#{schedule.schedule_id}"
        return self.update_where(
            _key(schedule.org_id, schedule.schedule_id),
            expression,
            condition="attribute_exists(pk) AND next_fire_at = :seen",
            values=changes,
        )

    def set_exclusions(self, schedule: Schedule, exclusions: Mapping[str, LaneExclusion]) -> None:
        self.update_where(
            _key(schedule.org_id, schedule.schedule_id),
            f"SET exclusions = :e, {_REVISED}",
            condition=EXISTS,
            values={":e": decimals(exclusions), **_ONE_MORE},
        )

    def due(self, now_iso: str, *, limit: int = 100) -> list[Schedule]:
        """Active schedules whose next fire is at or before `now_iso`, earliest first."""
        return [schedule_from_item(item) for item in self._due_on(DUE, now_iso, limit)]

    # -- history -------------------------------------------------------------------------------
    def versions(
        self, schedule_id: str, *, limit: int, before: int | None = None
    ) -> tuple[list[ScheduleVersion], int | None]:
        """Versions newest first, older than version `before`; the last version's number when
        older ones are left."""
        start = version_sk(before).removeprefix("VERSION#") if before is not None else None
        found, more = self._history(
            schedule_id, "VERSION#", newest_first=True, limit=limit, start_after=start
        )
        versions = [from_stored(ScheduleVersion, item, schedule_id=schedule_id) for item in found]
        return versions, (versions[-1].version if more is not None and versions else None)

    def create_run(self, run: ScheduleRun) -> bool:
        """Record a firing once; False when this fire time already has its run."""
        return self.insert_once({**_run_keys(run.schedule_id, run.fire_at), **asdict(run)})

    def finish_run(self, run: ScheduleRun) -> bool:
        """The run's outcome: its state, and its batch or its error; False when the run is
        gone (its schedule was deleted while it fired, and its history with it): nothing is
        written back."""
        outcome = {"state": run.state, "batch_id": run.batch_id, "error": run.error}
        changes = {name: value for name, value in outcome.items() if value is not None}
        key = {k: to_value(v) for k, v in _run_keys(run.schedule_id, run.fire_at).items()}
        return conditional_update(self.dynamodb, **set_update(self.table_name, key, changes))

    def run(self, schedule_id: str, fire_at: str) -> ScheduleRun | None:
        key = {k: to_value(v) for k, v in _run_keys(schedule_id, fire_at).items()}
        return self.read_at(key, lambda item: from_stored(ScheduleRun, plain(item)))

    def runs(
        self, schedule_id: str, *, limit: int, start_after: str | None
    ) -> tuple[list[ScheduleRun], str | None]:
        """Runs newest first; the cursor is the last fire time."""
        found, cursor = self._history(
            schedule_id, "RUN#", newest_first=True, limit=limit, start_after=start_after
        )
        return [from_stored(ScheduleRun, plain(item)) for item in found], cursor

    def benchmark_item(self, schedule_id: str, regression: RegressionRecord) -> TransactItem:
        """The Put of one regression run's record, for the transaction that settles its hold
        (whose condition on the pending hold makes it written once, by the settlement that
        charged it: services/schedules/regression.py)."""
        sk = f"BENCH#{int(regression['version']):06d}#{regression['regression_id']}"
        values = decimals({"pk": f"{_PREFIX}{schedule_id}", "sk": sk, **regression})
        return {"Put": put_request(self.table_name, to_item(values))}

    def benchmarks(self, schedule_id: str, version: int) -> list[RegressionRecord]:
        """One version's regression runs, newest first (without their keys)."""
        found = self._history(schedule_id, f"BENCH#{version:06d}#", newest_first=True, limit=1000)[0]
        return [
            cast(RegressionRecord, {k: v for k, v in run.items() if k not in ("pk", "sk")}) for run in found
        ]

    def purge_history(self, schedule_id: str, *, at_most: int) -> tuple[int, bool]:
        """Delete at most `at_most` of a deleted schedule's history items (versions, runs,
        regression runs): how many were deleted, and whether none is left (its purge marker
        aside; an item DynamoDB left unprocessed is left for the next pass)."""
        request = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": to_value(f"{_PREFIX}{schedule_id}")},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        keys: list[dict[str, Any]] = []
        more = False
        for item in raw_items(self.dynamodb.query, request):
            if item["sk"]["S"] == _PURGE_SK:
                continue
            if len(keys) == at_most:
                more = True
                break
            keys.append({"pk": item["pk"], "sk": item["sk"]})
        left = self.delete_keys(keys)
        return len(keys) - left, not more and left == 0

    def purges_due(self, now_iso: str, *, limit: int) -> list[str]:
        """The deleted schedules whose history purge is due at or before `now_iso`, earliest
        first."""
        return [str(item["schedule_id"]) for item in self._due_on(PURGE_DUE, now_iso, limit)]

    def _due_on(self, partition: str, now_iso: str, limit: int) -> list[dict[str, Any]]:
        """One page of `partition`'s entries on `gsi1` (`<when>#<id>`) due at or before
        `now_iso`, earliest first, as plain values."""
        request = index_due(self.table_name, "gsi1", partition, now_iso, Limit=limit)
        return [from_item(i) for i in self.dynamodb.query(**request).get("Items", [])]

    def end_purge(self, schedule_id: str) -> None:
        """The purge of a schedule's history done: its marker goes."""
        self.delete_where({"pk": to_value(f"{_PREFIX}{schedule_id}"), "sk": to_value(_PURGE_SK)})

    def _history(
        self, schedule_id: str, prefix: str, *, newest_first: bool, limit: int, start_after: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        request = prefix_query(
            self.table_name,
            f"{_PREFIX}{schedule_id}",
            prefix,
            start_sk=f"{prefix}{start_after}" if start_after else None,
            ScanIndexForward=not newest_first,
            ConsistentRead=True,
            Limit=limit + 1,
        )
        found: list[dict[str, Any]] = []
        for response in pages(self.dynamodb.query, request):
            found.extend(with_floats(plain(from_item(i))) for i in response.get("Items", []))
            if len(found) > limit:
                break
        page = found[:limit]
        cursor = str(page[-1]["sk"])[len(prefix) :] if len(found) > limit else None
        return page, cursor


def _purge_marker(org_id: str, schedule_id: str, purge_at: str) -> dict[str, Any]:
    """The mark, in the history's own partition, of a deleted schedule whose history is left
    to purge: on the sparse `gsi1` under `PURGE_DUE` from `purge_at`."""
    return {
        "pk": f"{_PREFIX}{schedule_id}",
        "sk": _PURGE_SK,
        "kind": "schedule_purge",
        "org_id": org_id,
        "schedule_id": schedule_id,
        "gsi1pk": PURGE_DUE,
        "gsi1sk": f"{purge_at}#{schedule_id}",
    }


def _run_keys(schedule_id: str, fire_at: str) -> dict[str, str]:
    return {"pk": f"{_PREFIX}{schedule_id}", "sk": f"RUN#{fire_at}"}
