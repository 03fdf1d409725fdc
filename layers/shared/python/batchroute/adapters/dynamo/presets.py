"""Presets in the `controls` table (docs/presets.md).

| Item | pk / sk |
|---|---|
| head (the latest version's content, archived or not) | `ORG#<org>` / `PRESET#<name>` |
| version (immutable) | `ORG#<org>` / `PRESETV#<name>#<version:06d>` |
| the org's count of active presets | `ORG#<org>` / `PRESETS` (`count`) |
| golden-set regression run (per lane) | `ORG#<org>` / `PRESETB#<name>#<version:06d>#<regression id>` |

A preset's content is kept as one JSON string (`template`), so numbers such as a
temperature round-trip exactly. Every write is one transaction: create (count under the
limit, head, version 1), a new version (head conditional on the version it was read at,
and not archived; the version item create-once), archive (head, count down) and revive
(count under the limit, head conditional on archived, the next version). Reads are one
`GetItem` (the head for `name`, the version item for `name@N`); a list is one `Query` page
on `begins_with(sk, "PRESET#")` (heads only: versions sort under `PRESETV#`).
"""

from __future__ import annotations

import json
from typing import Any, cast

from batchroute.adapters.dynamo.codec import (
    NEW,
    decimals,
    from_item,
    plain,
    put_request,
    to_item,
    update_request,
    with_floats,
)
from batchroute.adapters.dynamo.reads import prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.domain.presets.golden_sets import RegressionRecord
from batchroute.domain.presets.presets import (
    Preset,
    PresetTemplate,
    PresetVersion,
)
from batchroute.domain.stored import from_stored
from batchroute.transactions import TransactItem

HEAD_PREFIX = "PRESET#"
VERSION_PREFIX = "PRESETV#"
BENCH_PREFIX = "PRESETB#"  # not under HEAD_PREFIX: a heads query never sees them
COUNT_SK = "PRESETS"
_KEYS = ("pk", "sk", "kind")
_ACTIVE = "attribute_exists(pk) AND attribute_not_exists(archived_at)"
_ACTIVE_AT_SEEN = f"{_ACTIVE} AND latest_version = :seen"
_ARCHIVED_AT_SEEN = "attribute_exists(archived_at) AND latest_version = :seen"


def _pk(org_id: str) -> dict[str, str]:
    return {"S": f"ORG#{org_id}"}


def _head_key(org_id: str, name: str) -> dict[str, Any]:
    return {"pk": _pk(org_id), "sk": {"S": f"{HEAD_PREFIX}{name}"}}


def _count_key(org_id: str) -> dict[str, Any]:
    return {"pk": _pk(org_id), "sk": {"S": COUNT_SK}}


def _version_sk(name: str, version: int) -> str:
    return f"{VERSION_PREFIX}{name}#{version:06d}"


class PresetStore(DynamoStore):
    def create(self, preset: Preset, *, limit: int) -> str | None:
        """Write a new preset (head and version 1); None, or why not: `exists`, `limit`."""
        org_id = preset.latest.org_id
        written = self.transact(
            [
                self.count_up(_count_key(org_id), limit=limit),
                self._put(_head_item(preset), NEW),
                self._put(_version_item(preset.latest), NEW),
            ]
        )
        if written:
            return None
        return "exists" if self.head(org_id, preset.name) is not None else "limit"

    def add_version(self, preset: Preset, *, seen_version: int) -> bool:
        """Write the next version and move the head to it, only if the head is still at
        `seen_version` and not archived; False otherwise."""
        return self.transact(self._next_version(preset, _ACTIVE_AT_SEEN, seen_version))

    def revive(self, preset: Preset, *, seen_version: int, limit: int) -> bool:
        """An archived preset back in use at its next version; False when it changed, or
        the org is at its limit."""
        count = self.count_up(_count_key(preset.latest.org_id), limit=limit)
        return self.transact([count, *self._next_version(preset, _ARCHIVED_AT_SEEN, seen_version)])

    def archive(self, org_id: str, name: str, *, at: str) -> bool:
        """Mark the preset archived and free its place in the count; False when there is no
        such active preset."""
        archive = {
            "Update": update_request(
                self.table_name,
                _head_key(org_id, name),
                "SET archived_at = :at, updated_at = :at",
                condition=_ACTIVE,
                values={":at": at},
            )
        }
        return self.transact([archive, self.count_down(_count_key(org_id))])

    def head(self, org_id: str, name: str) -> Preset | None:
        return self.read_at(_head_key(org_id, name), _head_from)

    def benchmark_item(self, org_id: str, name: str, regression: RegressionRecord) -> TransactItem:
        """The Put of one golden-set regression run of a preset version, for the transaction
        that settles its hold (written once, by the settlement that charged it:
        services/schedules/regression.py)."""
        sk = f"{BENCH_PREFIX}{name}#{int(regression['version']):06d}#{regression['regression_id']}"
        values = decimals({"pk": f"ORG#{org_id}", "sk": sk, "kind": "preset_benchmark", **regression})
        return {"Put": put_request(self.table_name, to_item(values))}

    def benchmarks(self, org_id: str, name: str, version: int) -> list[RegressionRecord]:
        """A version's regression runs, newest first (a version keeps few: each is paid),
        without their keys."""
        prefix = f"{BENCH_PREFIX}{name}#{version:06d}#"
        request = prefix_query(
            self.table_name, f"ORG#{org_id}", prefix, ScanIndexForward=False, ConsistentRead=True
        )
        return [
            cast(RegressionRecord, {k: v for k, v in with_floats(plain(item)).items() if k not in _KEYS})
            for item in self.query_all(request)
        ]

    def version(self, org_id: str, name: str, version: int) -> PresetVersion | None:
        return self.read_at({"pk": _pk(org_id), "sk": {"S": _version_sk(name, version)}}, _version_from)

    def heads(self, org_id: str, *, after: str | None, limit: int) -> tuple[list[Preset], str | None]:
        """One page of the org's presets by name; the name to continue after, or None."""
        return self._page(org_id, HEAD_PREFIX, after, limit, forward=True, read=_head_from)

    def versions(
        self, org_id: str, name: str, *, before: int | None, limit: int
    ) -> tuple[list[PresetVersion], int | None]:
        """One page of a preset's versions, newest first; the version to continue before."""
        after = _version_sk(name, before)[len(VERSION_PREFIX) :] if before is not None else None
        page, last = self._page(
            org_id,
            f"{VERSION_PREFIX}{name}#",
            after,
            limit,
            forward=False,
            read=_version_from,
            base=VERSION_PREFIX,
        )
        return page, (page[-1].version if last is not None and page else None)

    # -- helpers ------------------------------------------------------------------------------
    def _page(
        self,
        org_id: str,
        prefix: str,
        after: str | None,
        limit: int,
        *,
        forward: bool,
        read: Any,
        base: str = HEAD_PREFIX,
    ) -> tuple[list[Any], str | None]:
        start = None if after is None else f"{base}{after}"
        response = self.dynamodb.query(
            **prefix_query(
                self.table_name,
                f"ORG#{org_id}",
                prefix,
                start_sk=start,
                ScanIndexForward=forward,
                Limit=limit + 1,  # one more than the page: a cursor only when a row follows it
                ConsistentRead=True,
            )
        )
        items = response.get("Items", [])
        rows = [read(from_item(item)) for item in items[:limit]]
        # A query stops at its `Limit` or at 1 MB read, whichever comes first (large presets
        # reach the megabyte first): past the page, its last row is where the next starts; cut
        # at the megabyte, the query's last key is.
        last = (
            items[limit - 1]["sk"] if len(items) > limit else response.get("LastEvaluatedKey", {}).get("sk")
        )
        return rows, (str(last["S"])[len(base) :] if last else None)

    def _next_version(self, preset: Preset, condition: str, seen_version: int) -> list[dict[str, Any]]:
        return [
            self._put(_head_item(preset), condition, {":seen": seen_version}),
            self._put(_version_item(preset.latest), NEW),
        ]

    def _put(
        self, item: dict[str, Any], condition: str, values: dict[str, object] | None = None
    ) -> dict[str, Any]:
        return {"Put": put_request(self.table_name, to_item(item), condition=condition, values=values)}


def _version_values(version: PresetVersion) -> dict[str, Any]:
    return {
        "org_id": version.org_id,
        "name": version.name,
        "version": version.version,
        # UTF-8 as it is (not \u escapes, up to six bytes a character): the item's 400 KB
        "template": json.dumps(version.template(), sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        "version_created_at": version.created_at,
        "created_by": version.created_by,
    }


def _head_item(preset: Preset) -> dict[str, Any]:
    return {
        "pk": f"ORG#{preset.latest.org_id}",
        "sk": f"{HEAD_PREFIX}{preset.name}",
        "kind": "preset",
        **_version_values(preset.latest),
        "latest_version": preset.latest.version,
        "created_at": preset.created_at,
        "updated_at": preset.updated_at,
        "archived_at": preset.archived_at,
    }


def _version_item(version: PresetVersion) -> dict[str, Any]:
    return {
        "pk": f"ORG#{version.org_id}",
        "sk": _version_sk(version.name, version.version),
        "kind": "preset_version",
        **_version_values(version),
    }


def _version_from(item: dict[str, Any]) -> PresetVersion:
    template = cast(PresetTemplate, json.loads(str(item["template"])))
    return from_stored(
        PresetVersion,
        template,
        org_id=str(item["org_id"]),
        name=str(item["name"]),
        version=int(item["version"]),
        created_at=str(item.get("version_created_at") or ""),
        created_by=item.get("created_by"),
    )


def _head_from(item: dict[str, Any]) -> Preset:
    return Preset(
        latest=_version_from(item),
        created_at=str(item.get("created_at") or ""),
        updated_at=str(item.get("updated_at") or ""),
        archived_at=item.get("archived_at"),
    )
