"""Request and response models: feedback on batch item results and chat completions
(docs/feedback.md). The body is checked here (`invalid_request` with `details.field`, e.g.
`target.batch_id`, `labels[2]`); the domain adds the rules across fields (`create_feedback`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from batchroute.domain.feedback.feedback import (
    COMMENT_MAX,
    CUSTOMER_ITEM_ID_MAX,
    LABEL_PATTERN,
    LABELS_MAX,
    LIST_LIMIT_MAX,
    CreateFeedback,
    FeedbackFilters,
    RatingScale,
    Target,
    TargetType,
    create_feedback,
    parse_target,
)
from functions.api.schemas.common import ResourceBody, domain_rule, omittable

Label = Annotated[str, Field(pattern=LABEL_PATTERN.pattern)]


class BatchItemTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["batch_item"]
    batch_id: str = Field(description="batch_...")
    customer_item_id: str = Field(max_length=CUSTOMER_ITEM_ID_MAX)


class ChatCompletionTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["chat_completion"]
    id: str = Field(description="chatcmpl-... (a direct completion, or a queued job's result)")


class FeedbackCreate(ResourceBody):
    """Feedback on one result. Sent again by the same author on the same target, it replaces
    the earlier one (200). Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"required": ["target", "rating"]})

    target: Annotated[Target, domain_rule(parse_target, BatchItemTarget | ChatCompletionTarget)] = omittable(
        "What is rated"
    )
    rating: StrictInt = omittable("thumbs: -1 or 1; stars: 1 to 5")
    rating_scale: RatingScale = omittable("Default thumbs")
    comment: Annotated[str, Field(max_length=COMMENT_MAX)] | None = omittable("Free text")
    labels: Annotated[list[Label], Field(max_length=LABELS_MAX)] = omittable(
        f"Up to {LABELS_MAX} slugs (a-z, 0-9, _ and -), e.g. wrong_format"
    )

    def command(self) -> CreateFeedback:
        """What the service saves, after the domain's rules across the fields."""
        return create_feedback(self.target, self.rating, self.rating_scale, self.comment, self.labels)


class FeedbackListQuery(BaseModel):
    """The listing's query: filters (all combine with AND) and the page."""

    target_type: TargetType | None = None
    batch_id: Annotated[str | None, Field(max_length=64)] = None
    model: Annotated[str | None, Field(max_length=200)] = None
    provider: Annotated[str | None, Field(max_length=100)] = None
    rating_scale: RatingScale | None = None
    cursor: Annotated[str | None, Field(max_length=2048)] = None
    limit: Annotated[int, Field(ge=1, le=LIST_LIMIT_MAX)] = 20

    def filters(self) -> FeedbackFilters:
        return FeedbackFilters(**self.model_dump(exclude={"cursor", "limit"}))


class FeedbackTargetOut(BaseModel):
    type: Literal["batch_item", "chat_completion"]
    batch_id: str | None = Field(default=None, description="batch_item")
    customer_item_id: str | None = Field(default=None, description="batch_item")
    id: str | None = Field(default=None, description="chat_completion")


class FeedbackOut(BaseModel):
    id: str = Field(description="fb_...")
    object: Literal["feedback"]
    target: FeedbackTargetOut
    rating: int
    rating_scale: Literal["thumbs", "stars"]
    comment: str | None
    labels: list[str]
    model: str = Field(description="The model that served the target")
    provider: str = Field(description="The provider that served the target")
    author: str = Field(description="The user (or an API key without a user) who gave it")
    created_at: str
    updated_at: str


class FeedbackList(BaseModel):
    object: Literal["list"]
    data: list[FeedbackOut]
    next_cursor: str | None = Field(description="null at the end")


class Thumbs(BaseModel):
    up: int
    down: int


class Stars(BaseModel):
    count: int
    mean: str | None = Field(description="A decimal string with two places; null without star ratings")


class LabelCount(BaseModel):
    label: str
    count: int


class FeedbackFigures(BaseModel):
    count: int
    thumbs: Thumbs
    stars: Stars
    top_labels: list[LabelCount] = Field(description="The five most used labels, most used first")


class ModelProviderFeedback(FeedbackFigures):
    model: str
    provider: str


class FeedbackSummary(BaseModel):
    object: Literal["feedback_summary"]
    period: Literal["daily", "monthly"]
    start: str = Field(description="The first UTC date of the period")
    end: str = Field(description="The last UTC date of the period")
    total: FeedbackFigures
    by_model_provider: list[ModelProviderFeedback] = Field(description="Most feedback first")
