"""What a client asks of schedules, as the request models build it (functions/api/schemas/
schedules.py checks each field once, at the edge, with the rules of domain/schedules/schedules.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from batchroute.domain.presets.golden_sets import GoldenSet
from batchroute.domain.schedules.schedules import BatchOptions, InputSource, ScheduleDefinition, ScheduleState


@dataclass(frozen=True, slots=True)
class CreateSchedule:
    """A recurring schedule, at version 1."""

    definition: ScheduleDefinition
    state: ScheduleState = "active"


@dataclass(frozen=True, slots=True)
class UpdateSchedule:
    """A change of definition (a new version): only the fields named in `given` change."""

    given: frozenset[str]
    name: str = ""
    description: str | None = None
    expression: str = ""
    time_zone: str = "UTC"
    input_source: InputSource | None = None
    batch_options: BatchOptions = field(default_factory=BatchOptions)
    golden_set: GoldenSet | None = None

    def over(self, current: ScheduleDefinition) -> ScheduleDefinition:
        """The definition with the given fields changed."""
        return replace(current, **{name: getattr(self, name) for name in self.given})
