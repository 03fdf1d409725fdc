"""A checked file's item profile: what a quote needs of its items, computed once.

Quoting a file (and creating a batch over it without a quote) streams every item through
the preflight: 1M items of 600 bytes take ~18 s. Most of what the preflight learns does not
depend on the request, the org, the catalog or the live lane state: the item count, the
items digest, and per model the `ModelGroup` totals, the operations asked for and how large
the items are. The profile holds exactly that, built while the file's upload is checked
(which reads every line anyway), so a quote over a clean file can build its preflight from
the profile instead of reading the file (`Preflight.from_profile`, docs/files.md "Item
profile").

Exact, never approximate:
- the count and digest are `QuoteService.read_items`'s (`ItemsDigest` over the canonical
  lines); the groups are the ones the preflight builds when every item passes its lane
  checks (item indexes count items, as `read_items` does);
- the per-item context-window check (`prompt + min(output, cap) <= window` for some lane)
  is monotone in both sizes, so the Pareto frontier of (window_prompt_tokens, output_tokens) over
  a model's items decides it for all of them: every item is dominated by a frontier point,
  and every frontier point is an item; an embeddings item's inputs summed must also fit the
  lane's per-request limit, if any: the profile stands in only when every frontier point
  fits a lane whose limit takes the largest such sum (`max_embedding_prompt_tokens`);
- a file with anything unusual is not profiled (`usable` false, with the reason): a line
  that is not a JSON object, an item with a shape problem (`read_item`), a duplicate
  `customer_item_id`, an item naming a `preset` (presets rewrite items), more than
  MAX_MODELS models or more than MAX_FRONTIER frontier points for one model. Those files
  are quoted by streaming, which reports every problem with its line.

The facts of an item are the estimator's (domain/routing/items.py, domain/catalog/tokens.py): a profile
stored under another estimator (`FACTS`) is not trusted (the file service builds it again
from the file), so a deploy that changes the estimate never prices from stale facts.
Bump FACTS_REVISION when `read_item` changes what it reads. Pure: no I/O.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from batchroute.domain.batches.canonical_json import ItemsDigest
from batchroute.domain.batches.item_ids import IdHashes
from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.line_shifts import LineShifts
from batchroute.domain.catalog import tokens
from batchroute.domain.routing.items import ModelGroup, read_item
from batchroute.domain.routing.prompt_cache import SharedPrefixView, run_views, runs_of

PROFILE_VERSION: Final = 1
FACTS_REVISION: Final = 8  # bump when read_item's facts of an item change
FACTS: Final = (
    f"{FACTS_REVISION}:{tokens.BYTES_PER_TOKEN}:{tokens.TOKENS_PER_MESSAGE}:{tokens.TOKENS_PER_REQUEST}:"
    f"{tokens.TOKENS_PER_IMAGE}:{tokens.DEFAULT_OUTPUT_TOKENS}:{tokens.EMBEDDING_OUTPUT_TOKENS}"
)
MAX_MODELS: Final = 32
MAX_FRONTIER: Final = 256  # points per model
# A profile this large or smaller rides on the file's DynamoDB record (400 KB at most, and
# every read of the record pays for its size); a larger one is an S3 object next to the
# file, the record holding where (`stored_apart`). 32 models of 256 points stay far below 1 MiB.
RECORD_PROFILE_BYTES: Final = 16 * 1024
MAX_PROFILE_BYTES: Final = 1024 * 1024
_APART: Final = '{"apart":'


# The ModelGroup fields a profile keeps as they are (all ints but the model id).
_GROUP_FIELDS: Final = (
    "model",
    "first_index",
    "item_count",
    "prompt_tokens",
    "max_prompt_tokens",
    "output_tokens",
    "max_output_tokens",
    "max_item_tokens",
    "largest_index",
    "largest_dimensions",
    "max_embedding_prompt_tokens",
    "max_images",
    "max_image_bytes",
)


@dataclass(frozen=True)
class ModelProfile:
    """One model's items: the preflight's ModelGroup (as plain values) and the frontier."""

    model: str
    first_index: int
    item_count: int
    prompt_tokens: int
    max_prompt_tokens: int
    output_tokens: int
    max_output_tokens: int
    max_item_tokens: int
    largest_index: int  # the item of max_item_tokens (profiles kept before it: first_index)
    largest_dimensions: int
    max_embedding_prompt_tokens: int  # embeddings: the largest prompt of one item, inputs summed
    max_images: int  # the most image parts one item holds
    max_image_bytes: int  # the largest data: image of any item
    operations: frozenset[str]
    tools: Mapping[str, int]
    capabilities: Mapping[str, int]
    frontier: tuple[tuple[int, int], ...]  # (prompt_tokens, output_tokens), prompt ascending
    shared_prefixes: tuple[SharedPrefixView, ...] = ()  # ModelGroup.shared_prefixes()
    # hosted tool -> the items asking for it (profiles kept before it: every item of the group)
    tool_items: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, group: ModelGroup, frontier: tuple[tuple[int, int], ...]) -> ModelProfile:
        return cls(
            **{name: getattr(group, name) for name in _GROUP_FIELDS},
            operations=frozenset(group.operations),
            tools=dict(group.tools),
            capabilities=dict(group.capabilities),
            frontier=frontier,
            shared_prefixes=tuple(group.shared_prefixes()),
            tool_items=dict(group.tool_items),
        )

    def group(self) -> ModelGroup:
        """A fresh ModelGroup equal to the one the streamed preflight builds."""
        return ModelGroup(
            **{name: getattr(self, name) for name in _GROUP_FIELDS},
            operations=set(self.operations),
            tools=dict(self.tools),
            tool_items=dict(self.tool_items),
            capabilities=dict(self.capabilities),
            prefixes=runs_of(self.shared_prefixes),
        )

    def to_json(self) -> dict[str, object]:
        return {
            **{name: getattr(self, name) for name in _GROUP_FIELDS},
            "operations": sorted(self.operations),
            "tools": dict(sorted(self.tools.items())),
            "tool_items": dict(sorted(self.tool_items.items())),
            "capabilities": dict(sorted(self.capabilities.items())),
            "frontier": [list(point) for point in self.frontier],
            "prefixes": [dict(view) for view in self.shared_prefixes],
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ModelProfile:
        kept = {"largest_index": value["first_index"], **value}  # profiles kept before it had none
        numbers: dict[str, Any] = {name: int(kept[name]) for name in _GROUP_FIELDS if name != "model"}
        return cls(
            model=str(value["model"]),
            **numbers,
            operations=frozenset(str(op) for op in value["operations"]),
            tools={str(k): int(v) for k, v in value["tools"].items()},
            capabilities={str(k): int(v) for k, v in value["capabilities"].items()},
            frontier=tuple((int(p), int(w)) for p, w in value["frontier"]),
            shared_prefixes=tuple(run_views(runs_of(value.get("prefixes") or ()).items())),
            # the items asking for each hosted tool; a profile kept before it counted them:
            # every item of the group (the quote then counts calls for each, never fewer)
            tool_items=(
                {str(k): int(v) for k, v in value["tool_items"].items()}
                if "tool_items" in value
                else {str(tool): int(value["item_count"]) for tool in value["tools"]}
            ),
        )


@dataclass(frozen=True)
class ItemProfile:
    """A file's profile. Only a `usable` one stands in for the file's items."""

    usable: bool
    reason: str | None = None  # why not usable
    item_count: int = 0
    digest: str = ""
    models: tuple[ModelProfile, ...] = ()
    facts: str = FACTS
    lines: LineShifts = field(default_factory=LineShifts)  # where the items stand in the file

    def to_json(self) -> str:
        """The compact JSON text stored with the file."""
        value: dict[str, object] = {"v": PROFILE_VERSION, "facts": self.facts, "usable": self.usable}
        if self.usable:
            value.update(
                items=self.item_count,
                digest=self.digest,
                models=[m.to_json() for m in self.models],
                lines=self.lines.to_json(),
            )
        else:
            value["reason"] = self.reason
        return json.dumps(value, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> ItemProfile | None:
        """The stored profile, or None when there is none this code can trust (none stored,
        another version or estimator, or unreadable): the caller then streams the file."""
        if not text:
            return None
        try:
            value = json.loads(text)
            if value.get("v") != PROFILE_VERSION or value.get("facts") != FACTS:
                return None
            if not value["usable"]:
                return cls(usable=False, reason=str(value.get("reason")))
            return cls(
                usable=True,
                item_count=int(value["items"]),
                digest=str(value["digest"]),
                models=tuple(ModelProfile.from_json(m) for m in value["models"]),
                lines=LineShifts.from_json(value.get("lines")),  # profiles before it: no lines
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


class _Frontier:
    """The Pareto-maximal (prompt, output) points seen: prompts ascending, outputs descending."""

    __slots__ = ("outputs", "prompts")

    def __init__(self) -> None:
        self.prompts: list[int] = []
        self.outputs: list[int] = []

    def add(self, prompt: int, output: int) -> None:
        prompts, outputs = self.prompts, self.outputs
        at = bisect_left(prompts, prompt)  # the first point with a prompt >= this one
        if at < len(prompts) and outputs[at] >= output:
            return  # dominated (the point at `at` has the largest output of those to its right)
        end = at + 1 if at < len(prompts) and prompts[at] == prompt else at
        start = end
        while start > 0 and outputs[start - 1] <= output:  # points this one dominates
            start -= 1
        prompts[start:end] = [prompt]
        outputs[start:end] = [output]

    def points(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.prompts, self.outputs, strict=True))

    def __len__(self) -> int:
        return len(self.prompts)


class ItemProfileBuilder:
    """Fed every parsed line of a file in order (`add_lines`), then `finish()`. Stops working
    at the first thing that makes the profile unusable."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._count = 0
        self._digest = ItemsDigest()
        self._groups: dict[str, ModelGroup] = {}
        self._frontiers: dict[str, _Frontier] = {}
        # customer_item_ids as their hashes, 8 B an item (domain/batches/item_ids.py, as the preflight
        # of a file keeps them): a repeat, or rarely a collision, only costs the profile
        self._ids = IdHashes()
        self._lines = LineShifts()

    @property
    def usable(self) -> bool:
        return self._reason is None

    def add_lines(self, lines: Iterable[tuple[int, Mapping[str, Any] | LineError]]) -> None:
        if self._reason is not None:
            return
        for line, parsed in lines:
            if isinstance(parsed, LineError):
                self._reason = "line_error"
                return
            self._lines.note(self._count, line)
            self.add_item(parsed)
            if self._reason is not None:
                return

    def add_item(self, item: Mapping[str, Any]) -> None:
        if self._reason is not None:
            return
        if "preset" in item:
            self._reason = "preset"
            return
        facts, _ = read_item(item)
        if facts is None:
            self._reason = "item_problem"
            return
        self._ids.add(facts.customer_item_id)
        index = self._count
        group = self._groups.get(facts.model)
        if group is None:
            if len(self._groups) >= MAX_MODELS:
                self._reason = "too_many_models"
                return
            group = self._groups[facts.model] = ModelGroup(model=facts.model, first_index=index)
            self._frontiers[facts.model] = _Frontier()
        group.add(index, facts)
        frontier = self._frontiers[facts.model]
        frontier.add(facts.window_prompt_tokens, facts.output_tokens)
        if len(frontier) > MAX_FRONTIER:
            self._reason = "frontier_too_large"
            return
        self._digest.add(item)
        self._count = index + 1

    def finish(self) -> ItemProfile:
        if self._reason is not None:
            return ItemProfile(usable=False, reason=self._reason)
        if self._count == 0:
            return ItemProfile(usable=False, reason="empty")
        if self._ids.may_repeat():
            return ItemProfile(usable=False, reason="duplicate_customer_item_id")
        models = tuple(
            ModelProfile.of(group, self._frontiers[model].points())
            for model, group in sorted(self._groups.items())
        )
        digest = self._digest.hexdigest()
        profile = ItemProfile(
            usable=True, item_count=self._count, digest=digest, models=models, lines=self._lines
        )
        if len(profile.to_json()) > MAX_PROFILE_BYTES:
            return ItemProfile(usable=False, reason="too_large")
        return profile


def stored_apart(key: str) -> str:
    """What the file record holds for a profile kept as the S3 object `key`."""
    return json.dumps({"apart": key}, separators=(",", ":"))


def apart_key(stored: str | None) -> str | None:
    """The S3 key of a profile kept apart from the file record, None for one on the record."""
    if not stored or not stored.startswith(_APART):
        return None
    try:
        key = json.loads(stored)["apart"]
    except (ValueError, KeyError, TypeError):
        return None
    return key if isinstance(key, str) else None


def profile_items(items: Iterable[Mapping[str, Any] | LineError]) -> ItemProfile:
    """The profile of items in order, as the lines of a file (tests and tools; the file check
    feeds a builder)."""
    builder = ItemProfileBuilder()
    builder.add_lines(enumerate(items, start=1))  # as a file numbers its lines
    return builder.finish()
