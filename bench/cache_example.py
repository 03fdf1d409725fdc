"""The worked example of cache-aware routing (issue 32, docs/routing.md and docs/ledger.md):
N items (10,000 by default) sharing one ~3,000-token system prompt, each with a short review
of its own, on claude-3-5-haiku. The same batch is quoted and run twice, with cache-aware
routing off and on (the service setting CACHE_AWARE_ROUTING), and for each the quote's
figures and the final charge are printed.

Measured on the local stack, in process: moto (`mock_aws`, provisioned as the integration
tests are, Step Functions executing), the batch pipeline's real handlers polled from their
queues, and the providers called through their real adapters over HTTP against the vendor
emulators (batchroute_tools/emulators, started here as `make run` starts them), which cache
what Anthropic caches: a prefix marked with `cache_control`, of at least the model's minimum,
read back within its lifetime. The batch is made as batch create makes it
(tests/integration/batch_pipeline_support.create_batch: preflight, routing, the quote's price
reserved); each run gets a fresh org.

Printed per mode: the lane chosen, the quote's total (what is reserved: the uncached bound),
the lane's estimated provider cost and, with cache-aware routing, its expected provider cost
and savings; after the run, the cache tokens the vendor reported, the settled total, the
charge and the release, and the receipt's `prompt_cache` line.

Run from the repository root with
`.venv/bin/python -m bench.cache_example [--items 10000] [--quote-only]`
(`--quote-only` quotes without running: seconds, where running 10,000 items takes minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

os.environ.update(
    {
        "SIMULATED_PROVIDERS": "0",  # the real adapters, against the emulators
        "SIMULATED_LATENCY_MS": "0",
        "PROVIDER_RETRY_BASE_SECONDS": "0",
        "PROVIDER_BATCH_POLL_INTERVAL_SECONDS": "0.05",
        "RATE_LIMITS_ENABLED": "false",
    }
)

from moto import mock_aws

from batchroute.adapters.batch_artifacts import BatchArtifacts, receipt_key
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.s3_objects import S3Objects
from batchroute.config import get_settings
from batchroute_tools.emulators import build_vendors
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer
from bench.inprocess import provision_in_process
from tests.integration.batch_pipeline_support import (
    CreatedBatch,
    create_batch,
    heartbeat_all_lanes,
    run_until_done,
    start,
)
from tests.integration.principals import new_org

MODEL = "claude-3-5-haiku"
# ~12,000 bytes of English: ~3,000 tokens as the vendors count it (and as the router sizes a
# prefix, 4 bytes a token); the quote's conservative estimate counts 3 bytes a token.
SYSTEM = (
    "You label customer reviews of a hardware store. Give the sentiment (positive, negative or "
    "mixed), the main topic (delivery, quality, price, service or other) and one short reason. "
) * 66
MOTO_CONFIG: Any = {
    "core": {"mock_credentials": True, "reset_boto3_session": False},
    "stepfunctions": {"execute_state_machine": True},
}


def items(count: int) -> list[dict[str, Any]]:
    return [
        {
            "customer_item_id": f"review-{n}",
            "operation": "responses",
            "model": MODEL,
            "input": {
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {
                        "role": "user",
                        "content": f"Review {n}: the drill arrived two days late but works well.",
                    },
                ]
            },
            "max_output_tokens": 50,
        }
        for n in range(count)
    ]


@dataclass
class Mode:
    cache_aware: bool
    created: CreatedBatch
    seconds: float = 0.0
    receipt: dict[str, Any] | None = None


def quote(batch: list[dict[str, Any]], *, cache_aware: bool, chunk_size: int) -> Mode:
    os.environ["CACHE_AWARE_ROUTING"] = "true" if cache_aware else "false"
    get_settings.cache_clear()
    org = new_org(credit_usd="1000")
    return Mode(cache_aware, create_batch(org.org_id, batch, chunk_size=chunk_size))


def run(stack: Any, mode: Mode, budget_seconds: float) -> None:
    started = time.monotonic()
    outcome = run_until_done(stack, start(stack, mode.created.batch_id), budget_seconds=budget_seconds)
    mode.seconds = time.monotonic() - started
    if outcome["status"] != "SUCCEEDED":
        raise SystemExit(f"the workflow ended {outcome['status']}")
    artifacts = BatchArtifacts(S3Objects(get_settings().buckets["artifacts"]))
    mode.receipt = artifacts.read_json(receipt_key(mode.created.batch_id))


def report(mode: Mode) -> dict[str, Any]:
    (lane,) = mode.created.record.plan["groups"][0]["selected_lanes"]
    shown: dict[str, Any] = {
        "cache_aware_routing": mode.cache_aware,
        "lane": lane["lane_id"],
        "quote_total_reserved": str(mode.created.reserved.amount),
        "lane_estimated_provider_cost": lane["estimated_provider_cost"]["amount"],
        "lane_estimated_prompt_tokens": lane["estimated_prompt_tokens"],
    }
    if "prompt_cache" in lane:
        shown["lane_prompt_cache"] = lane["prompt_cache"]
    if mode.receipt is not None:
        batch = BatchRecords(get_settings().table_name("batches")).get(mode.created.batch_id)
        receipt = mode.receipt
        (ran,) = receipt["provider_lanes"]
        shown.update(
            run_seconds=round(mode.seconds, 1),
            state=batch.state if batch else None,
            usage=ran["usage"],
            provider_subtotal=receipt["provider_subtotal"]["amount"],
            settled_total=receipt["settled_total"]["amount"],
            credit_charged=receipt["credit_charged"]["amount"],
            credit_released=receipt["credit_released"]["amount"],
            receipt_prompt_cache=ran.get("prompt_cache"),
        )
    return shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--chunk-size", type=int, default=1_000)
    parser.add_argument("--quote-only", action="store_true", help="quote both ways, run nothing")
    parser.add_argument("--budget-seconds", type=float, default=3_600)
    args = parser.parse_args()
    batch = items(args.items)
    with mock_aws(config=MOTO_CONFIG):
        server = EmulatorServer(build_vendors(Behaviour(EmulatorConfig()))).start()
        try:
            os.environ["VENDOR_EMULATOR_URL"] = server.base_url
            stack = provision_in_process()
            heartbeat_all_lanes()
            modes = [quote(batch, cache_aware=on, chunk_size=args.chunk_size) for on in (False, True)]
            if not args.quote_only:
                for mode in modes:
                    run(stack, mode, args.budget_seconds)
        finally:
            server.stop()
        print(
            json.dumps({"items": args.items, "model": MODEL, "modes": [report(m) for m in modes]}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
