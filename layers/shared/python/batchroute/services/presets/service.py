"""Presets: create, list, read, edit (a new version every time) and archive an org's
request templates, and resolve a reference (`name` or `name@3`) to one version
(docs/presets.md; the rules in domain/presets/presets.py).

Every role may read presets (`batches:read`); the roles that run work may write them
(`batches:create`: owner, admin, member). Versions are immutable: an edit writes the next
one and moves the head to it, conditional on the version it was read at, so two concurrent
edits never both win. Archiving (DELETE) refuses the name to new requests, `name@N`
included; every version stays readable here, and batches already created keep running
what they were expanded to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, replace
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.pages import fitting, row_bytes
from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.presets.golden_sets import RegressionRecord, RegressionRunView
from batchroute.domain.presets.presets import (
    MAX_PRESETS_PER_ORG,
    Preset,
    PresetContent,
    PresetVersion,
    PresetVersionView,
    PresetView,
    check_name,
    merge_patch,
    parse_preset,
    parse_ref,
)
from batchroute.errors import Conflict, InvalidRequest, NotFound
from batchroute.observability import logger
from batchroute.services.presets.commands import CreatePreset, PatchPreset, ReplacePreset
from batchroute.services.presets.resolution import PresetExpander


class PresetRecords(Protocol):
    def create(self, preset: Preset, *, limit: int) -> str | None: ...

    def add_version(self, preset: Preset, *, seen_version: int) -> bool: ...

    def revive(self, preset: Preset, *, seen_version: int, limit: int) -> bool: ...

    def archive(self, org_id: str, name: str, *, at: str) -> bool: ...

    def head(self, org_id: str, name: str) -> Preset | None: ...

    def version(self, org_id: str, name: str, version: int) -> PresetVersion | None: ...

    def heads(self, org_id: str, *, after: str | None, limit: int) -> tuple[list[Preset], str | None]: ...

    def versions(
        self, org_id: str, name: str, *, before: int | None, limit: int
    ) -> tuple[list[PresetVersion], int | None]: ...

    def benchmarks(self, org_id: str, name: str, version: int) -> list[RegressionRecord]: ...


class PresetRegression(Protocol):
    def for_preset(self, preset: PresetVersion, *, trigger: str) -> RegressionRunView: ...


@dataclass(eq=False)
class Presets:
    store: PresetRecords
    _: KW_ONLY
    catalog: Catalog
    clock: Clock
    max_presets: int = MAX_PRESETS_PER_ORG
    regression: Callable[[], PresetRegression] | None = None

    # -- writing ---------------------------------------------------------------------------
    def create(self, principal: Principal, command: CreatePreset) -> Preset:
        """Version 1 of a new name; an archived name comes back at its next version."""
        authorize(principal, "batches:create")
        name, content = command.name, command.content
        now = isoformat(self.clock.now())
        archived = self.store.head(principal.org_id, name)
        if archived is not None and archived.archived_at is not None:
            return self._revive(principal, archived, content, now)
        preset = Preset(latest=_version(principal, name, 1, content, now), created_at=now, updated_at=now)
        refused = self.store.create(preset, limit=self.max_presets)
        if refused == "exists":
            raise Conflict(
                f"A preset named {name!r} exists; PUT or PATCH /v1/presets/{name} makes a new version.",
                code="preset_exists",
                details={"field": "name"},
            )
        if refused == "limit":
            raise self._at_limit()
        logger.info("preset created", extra={"org_id": principal.org_id, "preset": name})
        return preset

    def replace(self, principal: Principal, name: str, command: ReplacePreset) -> Preset:
        """PUT: the whole template again, as the next version."""
        authorize(principal, "batches:create")
        current = self._active(principal, name)
        return self._next(principal, current, command.content)

    def patch(self, principal: Principal, name: str, command: PatchPreset) -> Preset:
        """PATCH: the fields given over the latest version, as the next version."""
        authorize(principal, "batches:create")
        current = self._active(principal, name)
        merged = merge_patch(current.latest, command.fields)
        content = parse_preset(merged, self.catalog, with_name=False, kept=current.latest.template())
        return self._next(principal, current, content)

    def archive(self, principal: Principal, name: str) -> Preset:
        authorize(principal, "batches:create")
        current = self._active(principal, name)
        now = isoformat(self.clock.now())
        if not self.store.archive(principal.org_id, name, at=now):
            raise self._not_found(name)
        logger.info("preset archived", extra={"org_id": principal.org_id, "preset": name})
        return replace(current, archived_at=now, updated_at=now)

    # -- reading ---------------------------------------------------------------------------
    def listing(
        self, principal: Principal, *, cursor: str | None, limit: int, include_archived: bool
    ) -> tuple[list[PresetView], str | None]:
        authorize(principal, "batches:read")
        if cursor is not None:
            check_name(cursor, field_name="cursor")
        shown, more = self._heads(principal.org_id, cursor, limit, include_archived)
        # The page also stops at PAGE_MAX_BYTES (golden sets make a preset up to ~400 KB)
        views = fitting([preset.to_api() for preset in shown], size=row_bytes)
        return views, (views[-1]["name"] if len(views) < len(shown) else more)

    def _heads(
        self, org_id: str, cursor: str | None, limit: int, include_archived: bool
    ) -> tuple[list[Preset], str | None]:
        shown: list[Preset] = []
        after = cursor
        while True:  # archived heads are skipped, so a page may take more than one query
            # one more than the page: the cursor is given only when a preset follows it
            page, after = self.store.heads(org_id, after=after, limit=limit + 1)
            for preset in page:
                if include_archived or preset.archived_at is None:
                    shown.append(preset)
                    if len(shown) > limit:
                        return shown[:limit], shown[limit - 1].name
            if after is None:
                return shown, None

    def get(self, principal: Principal, name: str) -> Preset:
        authorize(principal, "batches:read")
        preset = self.store.head(principal.org_id, check_name(name)) if parse_ref(name) else None
        if preset is None:
            raise self._not_found(name)
        return preset

    def version(self, principal: Principal, name: str, version: int) -> PresetVersion:
        authorize(principal, "batches:read")
        found = self.store.version(principal.org_id, check_name(name), version) if version > 0 else None
        if found is None:
            raise NotFound(f"Preset {name!r} has no version {version}.", code="preset_version_not_found")
        return found

    def versions(
        self, principal: Principal, name: str, *, cursor: str | None, limit: int
    ) -> tuple[list[PresetVersionView], str | None]:
        self.get(principal, name)
        before: int | None = None
        if cursor is not None:
            if not cursor.isdecimal() or int(cursor) < 1:
                raise InvalidRequest("cursor must be a value returned as next_cursor.", code="invalid_cursor")
            before = int(cursor)
        page, more = self.store.versions(principal.org_id, name, before=before, limit=limit)
        views = fitting([version.to_api() for version in page], size=row_bytes)
        if len(views) < len(page):
            more = views[-1]["version"]
        return views, (str(more) if more is not None else None)

    # -- golden sets -----------------------------------------------------------------------
    def regress(self, principal: Principal, name: str, version: int | None) -> RegressionRunView:
        """Run a version's golden set (the latest when `version` is None) on every candidate
        lane of its model, the preset applied to each input; paid as a schedule's run."""
        authorize(principal, "batches:create")
        head = self._active(principal, name)  # an archived preset takes no new work, runs included
        found = head.latest if version is None else self.version(principal, name, version)
        if not found.golden_set:
            raise Conflict(f"Preset {found.ref} has no golden set.", code="no_golden_set")
        assert self.regression is not None
        return self.regression().for_preset(found, trigger="on_demand")

    def benchmarks(self, principal: Principal, name: str, version: int) -> list[RegressionRunView]:
        """A version's regression runs, newest first."""
        found = self.version(principal, name, version)
        return [
            {"object": "preset.regression_run", **run}
            for run in self.store.benchmarks(principal.org_id, found.name, found.version)
        ]

    # -- resolution ------------------------------------------------------------------------
    def expander(self, org_id: str) -> PresetExpander:
        """One request's expansion: each preset it names loaded once."""
        return PresetExpander(self, org_id)

    def resolve(self, org_id: str, ref: object) -> PresetVersion:
        """The version a request names; InvalidRequest (`invalid_preset_ref`,
        `preset_not_found`, `preset_version_not_found`, `preset_archived`) otherwise."""
        parsed = parse_ref(ref)
        if parsed is None:
            raise InvalidRequest(
                "preset must be a preset name, or name@version (e.g. support-triage@3).",
                code="invalid_preset_ref",
            )
        head = self.store.head(org_id, parsed.name)
        if head is None:
            raise InvalidRequest(f"No preset named {parsed.name!r}.", code="preset_not_found")
        if head.archived_at is not None:
            raise InvalidRequest(
                f"Preset {parsed.name!r} was deleted (archived) at {head.archived_at}; "
                "it takes no new requests.",
                code="preset_archived",
            )
        if parsed.version is None or parsed.version == head.latest.version:
            return head.latest
        found = self.store.version(org_id, parsed.name, parsed.version)
        if found is None:
            raise InvalidRequest(
                f"Preset {parsed.name!r} has no version {parsed.version} (latest {head.latest.version}).",
                code="preset_version_not_found",
            )
        return found

    # -- helpers ---------------------------------------------------------------------------
    def _next(self, principal: Principal, current: Preset, content: PresetContent) -> Preset:
        now = isoformat(self.clock.now())
        number = current.latest.version + 1
        preset = replace(
            current, latest=_version(principal, current.name, number, content, now), updated_at=now
        )
        if not self.store.add_version(preset, seen_version=current.latest.version):
            raise Conflict(
                "The preset changed while this edit was applied; read it again and retry.",
                code="concurrent_update",
            )
        logger.info(
            "preset versioned", extra={"org_id": principal.org_id, "preset": current.name, "version": number}
        )
        return preset

    def _revive(self, principal: Principal, archived: Preset, content: PresetContent, now: str) -> Preset:
        number = archived.latest.version + 1  # never reuse a number: name@N means one thing forever
        preset = Preset(
            latest=_version(principal, archived.name, number, content, now),
            created_at=archived.created_at,
            updated_at=now,
        )
        if not self.store.revive(preset, seen_version=archived.latest.version, limit=self.max_presets):
            current = self.store.head(principal.org_id, archived.name)
            if current is not None and current.archived_at is None:
                raise Conflict(f"A preset named {archived.name!r} exists.", code="preset_exists")
            raise self._at_limit()
        return preset

    def _active(self, principal: Principal, name: str) -> Preset:
        preset = self.get(principal, name)
        if preset.archived_at is not None:
            raise Conflict(
                f"Preset {name!r} is archived; POST /v1/presets with its name brings it back.",
                code="preset_archived",
            )
        return preset

    def _at_limit(self) -> Conflict:
        return Conflict(
            f"An organization may keep at most {self.max_presets} presets; delete one first.",
            code="preset_limit",
            details={"limit": self.max_presets},
        )

    @staticmethod
    def _not_found(name: str) -> NotFound:
        return NotFound(f"No preset named {name[:64]!r}.", code="preset_not_found")


def _version(principal: Principal, name: str, number: int, content: PresetContent, now: str) -> PresetVersion:
    return content.as_version(
        principal.org_id, name, number, at=now, by=principal.user_id or principal.key_id
    )
