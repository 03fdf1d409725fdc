"""Benchmarks of the service, each run as a module from the repository root (figures and the
exact commands of record: bench/RESULTS.md):

- `python -m bench.coldstart`: each handler's import time and each asset's zipped size (`make bench`);
- `python -m bench.quote`: the quote of a large uploaded file, on moto in-process;
- `python -m bench.pipeline`: the batch pipeline end to end on the local stack (`make bench-pipeline`);
- `python -m bench.chat_overhead`: what the chat endpoint adds over the provider (`make bench-chat`).
- `python -m bench.cost_model`: the whole AWS bill per 1M items of measured runs (`make bench-cost`).

A package rather than loose scripts so the benches share one copy of what they have in
common (the items they upload, the machine line, moto in-process) and import it, and the
repository's own packages, without putting folders on `sys.path` by hand. Not shipped: the
Lambda layer and the installed distribution leave it out.

The pipeline bench's parts: `stack` (start and stop a local stack, register, fund, upload),
`instrumented` (the stack's service and moto processes under the counters), `tally` (the
counters), `aws_requests` (AWS requests counted at moto, priced at list price), `cost_model`
(requests, Lambda GB-seconds, storage and transfer to the vendors, line by line), `capacity`
(DynamoDB request units), `profiling` (CPU profiles, the traced heap, RSS by batch state) and
`report` (what it prints).
"""
