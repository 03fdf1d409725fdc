"""Golden sets: a small list of inputs with their expected outputs, a scorer and a threshold,
carried by a schedule; a regression run answers every input on each candidate lane and
scores the lane (docs/schedules.md, Golden sets).

Scorers (pure; an answer is the text of the lane's message):
- `exact`: the answer, stripped, equals `expected` (a string);
- `contains`: the answer contains `expected` (a string);
- `json_field`: the answer parses as JSON and the value at `path` (dots, list indexes as
  numbers: `result.items.0.name`) equals `expected` (any JSON value);
- `numeric`: the first number in the answer is within `tolerance` of `expected` (a number).

A lane's score is the share of items that passed (0..1); it passes when score >= threshold.

A run holds credit until it settles; `run_deadline` is the latest it can still be running,
after which its hold is abandoned and the sweeper releases it (docs/schedules.md, "A run that
dies").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal, NotRequired, TypedDict

from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.routing.items import (
    MESSAGE_NAMES,
    PENALTIES,
    PENALTY_KEYS,
    SEED,
    SERIAL_TOOL_CALLS,
    WHITESPACE_STOP,
    read_item,
)
from batchroute.errors import InvalidRequest
from batchroute.money import MoneyView

ScorerKind = Literal["exact", "contains", "json_field", "numeric"]
SCORERS: Final[tuple[str, ...]] = ("exact", "contains", "json_field", "numeric")
MAX_GOLDEN_ITEMS: Final = 50
# What an item may hold that routes it to some lanes only (the capability -> the input's keys
# that ask for it): a golden item is answered on every candidate lane, so it may hold none.
LANE_SPECIFIC: Final[dict[str, tuple[str, ...]]] = {
    WHITESPACE_STOP: ("stop",),
    SEED: ("seed",),
    PENALTIES: PENALTY_KEYS,
    SERIAL_TOOL_CALLS: ("parallel_tool_calls",),
    MESSAGE_NAMES: ("messages",),  # a message's name
}
# The items' inputs and expected answers, as compact UTF-8 JSON: a golden set is kept in its
# schedule's or preset's DynamoDB items (400 KB each, beside a 32,000-character system prompt).
MAX_GOLDEN_ITEMS_BYTES: Final = 200 * 1024
MAX_EXPECTED_CHARS: Final = 4000
MAX_GOLDEN_MODEL: Final = 200
MAX_SCORER_PATH: Final = 200
DEFAULT_THRESHOLD: Final = 1.0
# What a run does after its last provider call (read the billing controls, settle and record
# it), allowed for in its deadline.
SETTLE_ALLOWANCE_SECONDS: Final = 60
# A run lives in one Lambda invocation (the API's, or the schedule's firing), which AWS stops
# after 15 minutes at the most: no run's calls outlast that, however many there are.
MAX_RUN_SECONDS: Final = 900
_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


class ScorerView(TypedDict):
    """A scorer as stored and shown: `path` for json_field, `tolerance` for numeric."""

    type: ScorerKind
    path: NotRequired[str | None]
    tolerance: NotRequired[float]


class GoldenItemView(TypedDict):
    input: dict[str, Any]  # the customer's chat input: {"messages": [...]}
    expected: Any  # any JSON value (json_field), a text or a number


class GoldenSetView(TypedDict):
    """A golden set as stored (in a schedule or a preset version) and shown."""

    model: str
    items: list[GoldenItemView]
    scorer: ScorerView
    threshold: float


class LaneUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int


class LaneError(TypedDict):
    index: str
    code: str


class LaneBenchmark(TypedDict):
    """One lane's line of a regression record: its score against the threshold."""

    lane_id: str
    provider: str
    model: str
    score: float
    passed: bool
    items_passed: int
    items_total: int
    errors: list[LaneError]
    usage: LaneUsage
    cost: MoneyView


class RegressionOwner(TypedDict, total=False):
    """Whose run it is: a schedule's (`schedule_id`) or a preset version's (`preset`)."""

    schedule_id: str
    preset: str


class RegressionRecord(RegressionOwner):
    """A golden-set regression run as stored (a benchmark, under its owner and version;
    services/schedules/regression.py makes it)."""

    regression_id: str
    version: int
    trigger: str
    scorer: ScorerView
    threshold: float
    created_at: str
    completed_at: str
    lanes: list[LaneBenchmark]
    charged: MoneyView


class RegressionRunView(RegressionRecord):
    """A regression run as shown."""

    object: Literal["schedule.regression_run", "preset.regression_run"]


@dataclass(frozen=True)
class Scorer:
    kind: ScorerKind
    path: str | None = None  # json_field
    tolerance: float = 0.0  # numeric

    def to_api(self) -> ScorerView:
        out: ScorerView = {"type": self.kind}
        if self.kind == "json_field":
            out["path"] = self.path
        if self.kind == "numeric":
            out["tolerance"] = self.tolerance
        return out


@dataclass(frozen=True)
class GoldenItem:
    input: Mapping[str, Any]  # a chat item's input: {"messages": [...]} (as a batch item's)
    expected: Any


@dataclass(frozen=True)
class GoldenSet:
    model: str
    items: tuple[GoldenItem, ...]
    scorer: Scorer
    threshold: float

    def to_api(self) -> GoldenSetView:
        return {
            "model": self.model,
            "items": [{"input": dict(i.input), "expected": i.expected} for i in self.items],
            "scorer": self.scorer.to_api(),
            "threshold": self.threshold,
        }


def score(scorer: Scorer, answer: str | None, expected: Any) -> bool:
    """Whether one answer passes."""
    if answer is None:
        return False
    if scorer.kind == "exact":
        return answer.strip() == str(expected).strip()
    if scorer.kind == "contains":
        return str(expected) in answer
    if scorer.kind == "json_field":
        found, value = _at_path(answer, scorer.path or "")
        return found and value == expected
    match = _NUMBER.search(answer)
    if match is None:
        return False
    number = float(match.group(0))
    return math.isfinite(number) and abs(number - float(expected)) <= scorer.tolerance


def lane_score(passed: int, total: int) -> float:
    return round(passed / total, 4) if total else 0.0


def run_deadline(started: datetime, *, calls: int, call_seconds: float) -> datetime:
    """The latest a regression run that held its credit at `started` can still be running: its
    `calls` provider calls, made one after another, each given up after `call_seconds` (the
    time-out the run gives every call, the connection's included), or the longest a Lambda
    invocation lives (`MAX_RUN_SECONDS`) if that is sooner, then the settlement's allowance.
    A hold still pending after it belongs to a run that died."""
    if calls < 0 or call_seconds <= 0:
        raise ValueError("a run's deadline needs a count of calls and a positive time-out")
    running = min(calls * call_seconds, MAX_RUN_SECONDS)
    return started + timedelta(seconds=running + SETTLE_ALLOWANCE_SECONDS)


def _at_path(answer: str, path: str) -> tuple[bool, Any]:
    try:
        value: Any = json.loads(answer)
    except ValueError:
        return False, None
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdecimal() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def parse_golden_set(raw: object, *, field: str = "golden_set") -> GoldenSet | None:
    """The golden set of a schedule body, or None; InvalidRequest names the field
    (`golden_set.items[2].expected`)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _invalid(field, "golden_set must be an object with model, items, scorer, threshold.")
    unknown = sorted(set(map(str, raw)) - {"model", "items", "scorer", "threshold"})
    if unknown:
        raise _invalid(f"{field}.{unknown[0]}", f"golden_set does not take {', '.join(unknown)}.")
    model = raw.get("model")
    if not isinstance(model, str) or not 1 <= len(model) <= MAX_GOLDEN_MODEL:
        raise _invalid(f"{field}.model", "golden_set.model must be an exact catalog model id.")
    scorer = _scorer(raw.get("scorer"), f"{field}.scorer")
    items = _items(raw.get("items"), scorer, f"{field}.items")
    pairs = [[i.input, i.expected] for i in items]
    size = len(json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_GOLDEN_ITEMS_BYTES:
        raise _invalid(
            f"{field}.items",
            f"A golden set's items are at most {MAX_GOLDEN_ITEMS_BYTES:,} bytes of JSON (these are "
            f"{size:,}): fewer or shorter inputs and expected answers.",
        )
    threshold = raw.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        raise _invalid(f"{field}.threshold", "threshold is the share of items that must pass: 0 to 1.")
    return GoldenSet(model=model, items=items, scorer=scorer, threshold=float(threshold))


def golden_model_problem(model: str, catalog: Catalog) -> str | None:
    """Why a golden set cannot run on `model` (None when it can): an unknown model, or one
    that does not answer the responses operation (an embeddings model: a regression run
    scores text answers, and would never run)."""
    known = catalog.model(model)
    if known is None:
        return f"Unknown model {model!r}: an exact catalog model id."
    if "responses" not in known.operations:
        return f"{model} gives no text answer to score (a golden set needs a responses model)."
    return None


def golden_set_from_api(raw: GoldenSetView) -> GoldenSet:
    """A stored golden set, as it was validated when it was saved: read, not validated again,
    so one saved under older rules (an item the preflight now refuses) still loads, runs and
    can be replaced rather than locking its schedule or preset."""
    scorer = raw["scorer"]
    return GoldenSet(
        model=raw["model"],
        items=tuple(GoldenItem(input=item["input"], expected=item["expected"]) for item in raw["items"]),
        scorer=Scorer(scorer["type"], path=scorer.get("path"), tolerance=float(scorer.get("tolerance", 0.0))),
        threshold=float(raw["threshold"]),
    )


def _scorer(raw: object, field: str) -> Scorer:
    if isinstance(raw, str):
        raw = {"type": raw}
    if not isinstance(raw, Mapping) or raw.get("type") not in SCORERS:
        raise _invalid(f"{field}.type", f"scorer.type must be one of {', '.join(SCORERS)}.")
    kind = raw["type"]
    if kind == "json_field":
        path = raw.get("path")
        if not isinstance(path, str) or not path or len(path) > MAX_SCORER_PATH:
            raise _invalid(f"{field}.path", "A json_field scorer needs a path (a.b.0.c).")
        return Scorer("json_field", path=path)
    if kind == "numeric":
        tolerance = raw.get("tolerance", 0)
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance < 0:
            raise _invalid(f"{field}.tolerance", "tolerance must be a number of at least 0.")
        return Scorer("numeric", tolerance=float(tolerance))
    return Scorer(kind)


def _items(raw: object, scorer: Scorer, field: str) -> tuple[GoldenItem, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not 1 <= len(raw) <= MAX_GOLDEN_ITEMS:
        raise _invalid(field, f"A golden set has 1-{MAX_GOLDEN_ITEMS} items.")
    items = []
    for index, entry in enumerate(raw):
        where = f"{field}[{index}]"
        if not isinstance(entry, Mapping):
            raise _invalid(where, "Each golden item is an object with input and expected.")
        payload = entry.get("input")
        if isinstance(payload, str):
            payload = {"messages": [{"role": "user", "content": payload}]}
        said = payload if isinstance(payload, Mapping) else {}
        if not isinstance(said.get("messages"), list) or not said["messages"]:
            raise _invalid(f"{where}.input", "input is a prompt (a string) or {messages: [...]}.")
        # What a batch item's input may hold, a golden item's may: it is sent to the same lanes
        facts, problems = read_item(
            {"customer_item_id": "golden", "operation": "responses", "model": "golden", "input": said}
        )
        if problems:
            raise _invalid(f"{where}.{problems[0].field}", problems[0].message)
        # ... and to every lane of its model, so nothing only some of them take
        for capability, keys in LANE_SPECIFIC.items():
            if facts is not None and capability in facts.capabilities:
                key = next((k for k in keys if said.get(k)), keys[0])  # a penalty: the non-zero one
                raise _invalid(
                    f"{where}.input.{key}",
                    f"What input.{key} asks for ({capability}) is not taken in a golden item: it runs "
                    "on every lane of its model, and only some take it.",
                )
        expected = entry.get("expected")
        if scorer.kind in ("exact", "contains") and (
            not isinstance(expected, str) or not 1 <= len(expected) <= MAX_EXPECTED_CHARS
        ):
            raise _invalid(
                f"{where}.expected", f"expected must be a text of 1-{MAX_EXPECTED_CHARS} characters."
            )
        if scorer.kind == "numeric" and (isinstance(expected, bool) or not isinstance(expected, int | float)):
            raise _invalid(f"{where}.expected", "expected must be a number for the numeric scorer.")
        if scorer.kind == "json_field" and len(json.dumps(expected)) > MAX_EXPECTED_CHARS:
            raise _invalid(
                f"{where}.expected", f"expected is at most {MAX_EXPECTED_CHARS} characters of JSON."
            )
        items.append(GoldenItem(input=dict(said), expected=expected))
    return tuple(items)


def _invalid(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, code="invalid_schedule", details={"field": field})
