"""The batch workflow's steps as Step Functions runs them: route (lane planning), run lanes
(execution, the runner, time budgets), finalize, settle, fail; and the sweeper that expires
batches past their SLA (docs/batches.md, Lifecycle)."""
