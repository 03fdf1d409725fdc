"""Expanding requests that name a preset, on every path that reads items or chat bodies
(docs/presets.md, Resolution).

One `PresetExpander` a request: it loads each distinct reference once (`name` and
`name@3` are looked up once each however many items name them), so a 50,000-item file
naming one preset costs one read. Items are expanded as they stream, before the preflight
reads them; an item whose preset cannot be resolved becomes a preflight issue at its own
path (`items[<n>].preset`), so the batch answers `batch_preflight_failed` with every such
item, as for any other item problem. A chat body's unknown preset is a plain 400.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.preflight import Issue
from batchroute.domain.chat.requests import preset_version_ref
from batchroute.domain.presets.presets import PresetVersion, apply_preset, apply_preset_to_request
from batchroute.errors import InvalidRequest

_ACTION = "Name an existing preset (GET /v1/presets), or name@version for one of its versions."


class Resolver(Protocol):
    def resolve(self, org_id: str, ref: object) -> PresetVersion: ...


@dataclass(eq=False)
class PresetExpander:
    """The presets one request names, each loaded once."""

    resolver: Resolver
    org_id: str
    _seen: dict[str, PresetVersion | InvalidRequest] = field(default_factory=dict, init=False)

    def lookup(self, ref: object) -> PresetVersion:
        key = ref if isinstance(ref, str) else repr(ref)
        found = self._seen.get(key)
        if found is None:
            try:
                found = self.resolver.resolve(self.org_id, ref)
            except InvalidRequest as refused:
                found = refused
            self._seen[key] = found
        if isinstance(found, InvalidRequest):
            raise found
        return found

    @property
    def loaded(self) -> int:
        """How many distinct references were looked up (the cost of the expansion)."""
        return len(self._seen)

    # -- a quote or batch body ---------------------------------------------------------------
    def request(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """A body with a batch-wide `preset`: its routing settings fill the body's routing
        fields; a bad reference is a 400 naming `preset`."""
        if body.get("preset") is None:
            return body
        try:
            preset = self.lookup(body["preset"])
        except InvalidRequest as refused:
            raise InvalidRequest(refused.message, code=refused.code, details={"field": "preset"}) from None
        return apply_preset_to_request(body, preset)

    def items(self, items: Iterable[tuple[int, Any]], *, default: object = None) -> Iterator[tuple[int, Any]]:
        """The items with their presets applied (an item without one takes the body's
        `default`); an unresolvable one as an Issue at its path."""
        position = 0
        for index, item in items:
            if isinstance(item, LineError):
                yield index, item
                continue
            ref = item.get("preset", default) if isinstance(item, dict) else None
            if ref is None or ("preset_version" in item and "preset" not in item):
                yield index, item  # no preset, or already expanded (a retried or quoted item)
            else:
                try:
                    yield index, apply_preset(item, self.lookup(ref))
                except InvalidRequest as refused:
                    line = index if index != position else None
                    yield (
                        index,
                        Issue(
                            category="jsonl_shape",
                            code=refused.code,
                            message=refused.message,
                            action=_ACTION,
                            path=f"items[{position}].preset",
                            line=line,
                        ),
                    )
            position += 1

    # -- a chat body -----------------------------------------------------------------------------
    def chat(self, body: Any) -> Any:
        """A chat-completions body with its preset applied; a bad reference is a 400 naming
        `preset`."""
        if not isinstance(body, dict) or body.get("preset") is None:
            return body
        preset_version_ref(body.get("preset_version"))  # a bad one is refused, not replaced
        try:
            return apply_preset(body, self.lookup(body["preset"]))
        except InvalidRequest as refused:
            raise InvalidRequest(refused.message, code=refused.code, details={"field": "preset"}) from None
