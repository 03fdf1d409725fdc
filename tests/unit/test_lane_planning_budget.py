"""The RunLane time budget: the Lambda's remaining time while a record is handled, else a fallback."""

from __future__ import annotations

from batchroute.services.workflow.time_budget import TimeBudget, invocation


class Context:
    def __init__(self, millis: int) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


def test_the_budget_reads_the_published_lambda_context() -> None:
    context = Context(42_000)
    with invocation(context):
        budget = TimeBudget(300)
        assert budget.remaining() == 42.0
        context.millis = 1_500
        assert budget.remaining() == 1.5
    # Outside the invocation a new budget counts down from its fallback
    now = [100.0]
    fallback = TimeBudget(300, monotonic=lambda: now[0])
    now[0] += 250
    assert fallback.remaining() == 50.0
    now[0] += 100
    assert fallback.remaining() == 0.0


def test_no_context_means_the_fallback() -> None:
    with invocation(None):
        assert 299 < TimeBudget(300).remaining() <= 300
