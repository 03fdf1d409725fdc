"""Feedback on what the service answered: a rating, a comment and labels on a batch item's
result or a chat completion (docs/feedback.md).

One feedback per target per author (the user, or an API key without a user): sending it again
changes it. Each feedback counts in ONE daily counter of the model and provider that served
the target; a change moves the counters by the difference (`counter_moves`), in the same
transaction as the feedback itself, so the summary (`summarize`) reads counters, never the
feedback.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Final, Literal, NotRequired, TypedDict, get_args

from batchroute.domain.request_fields import invalid
from batchroute.domain.stored import sparse
from batchroute.domain.views import view_of

COMMENT_MAX: Final = 4000
LABELS_MAX: Final = 10
LABEL_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
TOP_LABELS: Final = 5
CUSTOMER_ITEM_ID_MAX: Final = 256
LIST_LIMIT_MAX: Final = 100
LABEL_PREFIX: Final = "label:"  # a label's counter attribute

RatingScale = Literal["thumbs", "stars"]
TargetType = Literal["batch_item", "chat_completion"]
TARGET_TYPES: Final[tuple[str, ...]] = get_args(TargetType)


class TargetView(TypedDict):
    type: TargetType
    batch_id: NotRequired[str | None]  # batch_item
    customer_item_id: NotRequired[str | None]  # batch_item
    id: NotRequired[str | None]  # chat_completion


class FeedbackView(TypedDict):
    id: str
    object: Literal["feedback"]
    target: TargetView
    rating: int
    rating_scale: RatingScale
    comment: str | None
    labels: list[str]
    model: str
    provider: str
    author: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class Target:
    type: TargetType
    batch_id: str | None = None  # batch_item
    customer_item_id: str | None = None  # batch_item
    completion_id: str | None = None  # chat_completion

    @property
    def key(self) -> str:
        """The target in a store key: unique per target."""
        if self.type == "batch_item":
            return f"bi#{self.batch_id}#{self.customer_item_id}"
        return f"cc#{self.completion_id}"

    def to_api(self) -> TargetView:
        if self.type == "batch_item":
            return {"type": self.type, "batch_id": self.batch_id, "customer_item_id": self.customer_item_id}
        return {"type": self.type, "id": self.completion_id}


@dataclass(frozen=True, slots=True)
class CreateFeedback:
    """Feedback a body gives, validated at the edge (functions/api/schemas/feedback/feedback.py) and by
    the rules across its fields (`create_feedback`)."""

    target: Target
    rating: int
    rating_scale: RatingScale
    comment: str | None
    labels: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class FeedbackFilters:
    """The listing's filters, validated at the edge (functions/api/schemas/feedback/feedback.py);
    all combine with AND, each an equality on a stored field of the same name."""

    target_type: TargetType | None = None
    batch_id: str | None = None
    model: str | None = None
    provider: str | None = None
    rating_scale: RatingScale | None = None

    def equalities(self) -> dict[str, str]:
        """The filters given, by stored field (the store's `page` reads them as equalities)."""
        return sparse(self)  # every filter defaults to None: the ones given


@dataclass(frozen=True, kw_only=True)
class Feedback:
    feedback_id: str
    org_id: str
    target: Target
    author: str  # a user id, or an API key id for a key without a user
    rating: int
    rating_scale: RatingScale
    comment: str | None
    labels: tuple[str, ...]
    model: str
    provider: str
    day: str  # the counter day it counts on (UTC date of created_at)
    created_at: str
    updated_at: str
    version: int = 1

    def to_api(self) -> FeedbackView:
        return view_of(
            self,
            FeedbackView,
            id=self.feedback_id,
            object="feedback",
            target=self.target.to_api(),
            labels=list(self.labels),
        )


# -- the request ---------------------------------------------------------------------------
def create_feedback(
    target: Target | None, rating: int | None, scale: RatingScale | None, comment: str | None, labels: Any
) -> CreateFeedback:
    """The feedback a body gives, its fields type-checked at the edge (the request model,
    functions/api/schemas/feedback/feedback.py): a target is required, the rating must be on its scale
    (thumbs by default), an empty comment is none, a repeated label counts once."""
    if target is None:
        raise invalid("target", "target must be an object with a type.")
    scale = scale or "thumbs"
    allowed = (-1, 1) if scale == "thumbs" else (1, 2, 3, 4, 5)
    if rating is None or rating not in allowed:
        raise invalid("rating", f"rating on the {scale} scale is one of {', '.join(map(str, allowed))}.")
    return CreateFeedback(target, rating, scale, comment or None, tuple(dict.fromkeys(labels or ())))


def parse_target(value: Any, _name: str = "target") -> Target:
    """The rated target: a batch item (batch_ id and the item's id) or a chat completion."""
    if not isinstance(value, Mapping):
        raise invalid("target", "target must be an object with a type.")
    kind = value.get("type")
    if kind == "batch_item":
        extra = sorted(set(value) - {"type", "batch_id", "customer_item_id"})
        if extra:
            raise invalid(f"target.{extra[0]}", f"a batch_item target does not take {extra[0]}.")
        batch_id = value.get("batch_id")
        if not isinstance(batch_id, str) or not batch_id.startswith("batch_") or len(batch_id) > 64:
            raise invalid("target.batch_id", "target.batch_id must be a batch_ id.")
        item_id = value.get("customer_item_id")
        if not isinstance(item_id, str) or not 1 <= len(item_id) <= CUSTOMER_ITEM_ID_MAX:
            raise invalid("target.customer_item_id", "target.customer_item_id must be the item's id.")
        return Target("batch_item", batch_id=batch_id, customer_item_id=item_id)
    if kind == "chat_completion":
        extra = sorted(set(value) - {"type", "id"})
        if extra:
            raise invalid(f"target.{extra[0]}", f"a chat_completion target does not take {extra[0]}.")
        completion = value.get("id")
        if not isinstance(completion, str) or not completion.startswith("chatcmpl-") or len(completion) > 64:
            raise invalid("target.id", "target.id must be a chatcmpl- id.")
        return Target("chat_completion", completion_id=completion)
    raise invalid("target.type", f"target.type must be one of {', '.join(TARGET_TYPES)}.")


# -- counters ------------------------------------------------------------------------------
CounterKey = tuple[str, str, str]  # day, model, provider


def contribution(feedback: Feedback) -> dict[str, int]:
    """What one feedback adds to its counter."""
    moves = {"count": 1}
    if feedback.rating_scale == "thumbs":
        moves["thumbs_up" if feedback.rating > 0 else "thumbs_down"] = 1
    else:
        moves["stars_count"] = 1
        moves["stars_sum"] = feedback.rating
    for label in feedback.labels:
        moves[f"{LABEL_PREFIX}{label}"] = 1
    return moves


def counter_moves(before: Feedback | None, after: Feedback) -> dict[CounterKey, dict[str, int]]:
    """The counter changes that replace `before` (if any) by `after`, netted per counter and
    without zero moves (a transaction may touch each counter item once)."""
    moves: dict[CounterKey, dict[str, int]] = defaultdict(dict)
    for feedback, sign in ((before, -1), (after, 1)):
        if feedback is None:
            continue
        key = (feedback.day, feedback.model, feedback.provider)
        for name, n in contribution(feedback).items():
            moves[key][name] = moves[key].get(name, 0) + sign * n
    netted = {key: {k: v for k, v in values.items() if v} for key, values in moves.items()}
    return {key: values for key, values in netted.items() if values}


@dataclass(frozen=True, kw_only=True)
class FeedbackCounter:
    """One daily counter of a model and provider, as stored (the adapter reads its item)."""

    model: str
    provider: str
    count: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0
    stars_count: int = 0
    stars_sum: int = 0
    labels: Mapping[str, int] = field(default_factory=dict)  # label -> feedback carrying it


class ThumbsView(TypedDict):
    up: int
    down: int


class StarsView(TypedDict):
    count: int
    mean: str | None


class LabelCountView(TypedDict):
    label: str
    count: int


class FiguresView(TypedDict):
    count: int
    thumbs: ThumbsView
    stars: StarsView
    top_labels: list[LabelCountView]


class ModelProviderFiguresView(FiguresView):
    model: str
    provider: str


@dataclass
class FeedbackFigures:
    count: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0
    stars_count: int = 0
    stars_sum: int = 0
    labels: dict[str, int] = field(default_factory=dict)

    def add(self, counter: FeedbackCounter) -> None:
        self.count += counter.count
        self.thumbs_up += counter.thumbs_up
        self.thumbs_down += counter.thumbs_down
        self.stars_count += counter.stars_count
        self.stars_sum += counter.stars_sum
        for label, value in counter.labels.items():
            if value:
                self.labels[label] = self.labels.get(label, 0) + value

    def to_api(self) -> FiguresView:
        mean = None
        if self.stars_count:
            mean = str(
                (Decimal(self.stars_sum) / self.stars_count).quantize(Decimal("0.01"), ROUND_HALF_EVEN)
            )
        ranked = sorted(
            ((n, label) for label, n in self.labels.items() if n > 0), key=lambda p: (-p[0], p[1])
        )
        return {
            "count": self.count,
            "thumbs": {"up": self.thumbs_up, "down": self.thumbs_down},
            "stars": {"count": self.stars_count, "mean": mean},
            "top_labels": [{"label": label, "count": n} for n, label in ranked[:TOP_LABELS]],
        }


def summarize(
    counters: Iterable[FeedbackCounter],
) -> tuple[FeedbackFigures, list[tuple[str, str, FeedbackFigures]]]:
    """The total and the figures per model and provider (most feedback first) of the daily
    counters of a period."""
    total = FeedbackFigures()
    per: dict[tuple[str, str], FeedbackFigures] = {}
    for counter in counters:
        per.setdefault((counter.model, counter.provider), FeedbackFigures()).add(counter)
        total.add(counter)
    ranked = sorted(per.items(), key=lambda pair: (-pair[1].count, pair[0]))
    return total, [(model, provider, figures) for (model, provider), figures in ranked if figures.count > 0]
