"""What the chat endpoint adds over calling the same simulated provider directly, and how many
AWS calls a direct request makes before its first byte. One run measures both:

1. Latency. The local stack is started exactly as `make run` starts it (its own process,
   uvicorn, with moto and the vendor emulators each in a child process;
   tests/e2e/local_stack.py), with the simulated providers' time to
   first token and inter-token delay set by `--ttft-ms` / `--inter-token-ms`. Each round
   streams one request (`stream: true`, `include_usage`, pinned to one lane with
   `provider_preferences {only: [edge-eu], allow_fallbacks: false}`) over HTTP with httpx,
   and calls the same simulated provider (`SimulatedSyncProvider`, same settings, same
   request) in this process. TTFB = the first content delta; total = `[DONE]` (service) or
   `StreamEnd` (provider). Rounds alternate the two so both see the same machine noise; the
   added latency is the per-round difference, reported at p50 and p99. The baseline has no
   HTTP hop at all, so the figure includes localhost HTTP + SSE framing: conservative.
   `end` = the response's end (an SDK that reads to the end waits for it).
1b. Breakdown (`--breakdown-rounds`). The same rounds against the same runner started under
   bench/chat_probe.py's timing probes, joined per request (`x-request-id`): each AWS call
   split into botocore's own time, loopback HTTP (urllib3 + werkzeug), and moto's server
   (wall and CPU, and the time moto spent deep-copying tables for transaction rollback:
   measured in the moto process and sent back on the call's answer), the thread-pool hops,
   the service's own Python, the provider's request (from its send, on the early-start
   thread while the hold commits, to its first event), the relay beyond the provider's own
   time to first content (`relay_beyond_direct_ttfb`), whether the hold held the first byte
   back (`hold_end_after_provider_first_event` > 0), SSE delivery, and the settlement
   after `[DONE]`. All times are CLOCK_MONOTONIC (perf_counter), shared by every process on
   the machine. The probes cost a little themselves. `--stock-moto-rounds` repeats it with
   moto's own rollback (whole-table copies; batchroute_tools/local/moto_transactions.py is
   what the local stack uses instead), to show what that costs.
2. AWS calls. The same app, in process on moto (`mock_aws`, provisioned as the integration
   tests are), serves `--count-requests` warm requests while botocore's `before-call` hooks
   on every cached client count calls; a patched provider `stream()` marks the moment the
   provider is called (nothing reaches the client before it). Calls up to that moment are the
   hot path before the first byte.

Run from the repository root with `.venv/bin/python -m bench.chat_overhead [--rounds 200]
[--warmup 20]`. Exits 1 when a goal is missed: at most 2 AWS calls before the first byte; p50
added TTFB and total <= 24 ms (2 x LiteLLM's published 12 ms overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.inprocess import provision_in_process

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PROVIDER = "edge-eu"
PROVIDER_MODEL_ID = "llama-3.1-8b-instruct"  # the edge pool's name for MODEL (catalog lanes.toml)
GOAL_CALLS = 2
GOAL_ADDED_MS = 24.0


def _body(stream: bool = True) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Summarize the routing receipt in one line."}],
        "max_tokens": 32,
        "stream": stream,
        **({"stream_options": {"include_usage": True}} if stream else {}),
        "provider_preferences": {"only": [PROVIDER], "allow_fallbacks": False},
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- 1. latency against the local stack ---------------------------------------------------------
def _start(args: argparse.Namespace, probe_out: Path | None, stock_moto: bool = False) -> Any:
    """The local stack as `make run` starts it; with `probe_out`, the same runner under
    bench/chat_probe.py's timing probes (their records go to that file)."""
    from tests.e2e.local_stack import start_stack

    extra = {
        "SIMULATED_TTFT_MS": str(args.ttft_ms),
        "SIMULATED_INTER_TOKEN_MS": str(args.inter_token_ms),
        "RATE_LIMIT_PER_KEY": "1000000",
        "RATE_LIMIT_PER_ACCOUNT": "1000000",
    }
    os.environ.update(extra)
    # start_stack keeps only variables that are not settings; pass these through its env hook.
    import tests.e2e.local_stack as local_stack

    original_popen = local_stack.subprocess.Popen

    def popen(cmd: Any, **kwargs: Any) -> Any:
        kwargs["env"] = {**kwargs["env"], **extra}
        if probe_out is not None:
            kwargs["env"]["CHAT_PROBE_OUT"] = str(probe_out)
            kwargs["env"]["CHAT_PROBE_STOCK_MOTO"] = "1" if stock_moto else "0"
            cmd = [sys.executable, "-m", "bench.chat_probe"]  # local_stack starts it from the repo root
        return original_popen(cmd, **kwargs)

    local_stack.subprocess.Popen = popen  # type: ignore[assignment]
    try:
        return start_stack(Path(tempfile.mkdtemp(prefix="chat-bench-")))
    finally:
        local_stack.subprocess.Popen = original_popen  # type: ignore[assignment]


def run_rounds(
    args: argparse.Namespace, rounds: int, probe_out: Path | None = None, stock_moto: bool = False
) -> list[dict[str, Any]]:
    """`args.warmup` + `rounds` alternating rounds (provider directly, then the service);
    returns the measured rounds' client-side times (absolute perf_counter values too)."""
    from batchroute.providers.base import ProviderRequest, StreamDelta, StreamEnd
    from batchroute.providers.endpoints import ProviderEndpoint
    from batchroute.providers.openai import make_sync
    from tests.e2e.local_stack import stop_stack

    stack = _start(args, probe_out, stock_moto)
    # The baseline: the same provider (the stack's edge-eu emulator) called directly through
    # the same adapter, from this process: what the service adds is everything else.
    emulators = str(stack.describe()["emulators_url"])
    provider = make_sync(
        ProviderEndpoint(
            PROVIDER, "openai_compatible", f"{emulators}/hosts/{PROVIDER}/v1", credentials="none"
        ),
        None,
    )
    request = ProviderRequest(
        custom_id="chat",
        customer_item_id="chat",
        operation="responses",
        model=MODEL,
        provider_model_id=PROVIDER_MODEL_ID,
        input={k: v for k, v in _body().items() if k in ("messages", "max_tokens")},
        max_output_tokens=32,
    )
    rows: list[dict[str, Any]] = []
    try:
        with httpx.Client(base_url=stack.base_url, timeout=30) as api:
            created = api.post(
                "/v1/auth/agent-register",
                json={"email": f"bench-{uuid.uuid4().hex[:8]}@example.com", "password": "bench password 1"},
            )
            headers = {"Authorization": f"Bearer {created.json()['api_key']}"}
            for n in range(args.warmup + rounds):
                direct_ttfb, direct_total = _provider_round(provider, request, StreamDelta, StreamEnd)
                service = _service_round(api, headers)
                if n >= args.warmup:
                    rows.append({"direct_ttfb": direct_ttfb, "direct_total": direct_total, **service})
    finally:
        stop_stack(stack)
    return rows


def measure_latency(args: argparse.Namespace) -> dict[str, Any]:
    rows = run_rounds(args, args.rounds)

    def summary(key: str) -> dict[str, float]:
        values = [row[key] * 1000 for row in rows]
        return {"p50_ms": round(_pct(values, 0.5), 2), "p99_ms": round(_pct(values, 0.99), 2)}

    added = {
        "ttfb": [(r["service_ttfb"] - r["direct_ttfb"]) * 1000 for r in rows],
        "total": [(r["service_total"] - r["direct_total"]) * 1000 for r in rows],
        "end": [(r["service_end"] - r["direct_total"]) * 1000 for r in rows],
    }
    return {
        "rounds": len(rows),
        "completion_tokens": int(statistics.median(r["tokens"] for r in rows)),
        "provider_direct": {"ttfb": summary("direct_ttfb"), "total": summary("direct_total")},
        "service": {
            "ttfb": summary("service_ttfb"),
            "total": summary("service_total"),
            "end": summary("service_end"),
        },
        "added": {
            name: {"p50_ms": round(_pct(v, 0.5), 2), "p99_ms": round(_pct(v, 0.99), 2)}
            for name, v in added.items()
        },
    }


def _provider_round(provider: Any, request: Any, delta: type, end: type) -> tuple[float, float]:
    started = time.perf_counter()
    ttfb = 0.0
    for event in provider.stream(request):
        if isinstance(event, delta) and not ttfb:
            ttfb = time.perf_counter() - started
        if isinstance(event, end):
            break
    return ttfb, time.perf_counter() - started


def _service_round(api: httpx.Client, headers: dict[str, str]) -> dict[str, Any]:
    """One streamed request. TTFB = the first content delta; total = `[DONE]`; end = the
    response's end (what an SDK that reads to the end waits for)."""
    request_id = uuid.uuid4().hex
    started = time.perf_counter()
    ttfb = done = 0.0
    tokens = 0
    with api.stream(
        "POST", "/v1/chat/completions", json=_body(), headers={**headers, "x-request-id": request_id}
    ) as response:
        if response.status_code != 200:
            raise SystemExit(f"the service answered {response.status_code}: {response.read()!r}")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[len("data: ") :]
            if data == "[DONE]":
                done = time.perf_counter()
                continue
            event = json.loads(data)
            if not ttfb and event["choices"] and event["choices"][0]["delta"].get("content"):
                ttfb = time.perf_counter()
            if event.get("usage"):
                tokens = int(event["usage"]["completion_tokens"])
    end = time.perf_counter()
    return {
        "request_id": request_id,
        "client_start": started,
        "client_first_content": ttfb,
        "client_done": done,
        "service_ttfb": ttfb - started,
        "service_total": done - started,
        "service_end": end - started,
        "tokens": tokens,
    }


# -- 1b. where the added time goes (the probed stack) ------------------------------------------
def measure_breakdown(args: argparse.Namespace, stock_moto: bool = False) -> dict[str, Any]:
    """The same rounds against the same runner under bench/chat_probe.py, joined per request
    (x-request-id) with what the service, botocore and moto's server measured. The probes cost
    a little themselves: these rounds' totals are a touch above the plain run's."""
    out = Path(tempfile.mkdtemp(prefix="chat-probe-")) / "probe.jsonl"
    rows = run_rounds(args, args.breakdown_rounds, probe_out=out, stock_moto=stock_moto)
    time.sleep(0.5)  # the last answer's record is written once its settlement ended
    records = {}
    for line in out.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        records[record["request_id"]] = record
    joined = [(row, records[row["request_id"]]) for row in rows if row["request_id"] in records]
    parts = [_parts(row, record, args) for row, record in joined]
    keys = list(dict.fromkeys(key for p in parts for key in p))
    # A part missing from a request (the lane-state Query, every 15 s) counts over those that have it.
    return {
        "rounds": len(parts),
        "records": str(out),
        "p50_ms": {key: round(statistics.median(p[key] for p in parts if key in p), 2) for key in keys},
        "p99_ms": {key: round(_pct([p[key] for p in parts if key in p], 0.99), 2) for key in keys},
        "moto_tables_copied_per_hold": _tables_copied(joined[-1][1]) if joined else {},
    }


def _tables_copied(record: dict[str, Any]) -> dict[str, int]:
    """Item counts of the tables moto deep-copied for the last request's hold transaction."""
    for call in record["aws"]:
        if call["op"].endswith("TransactWriteItems"):
            for http in call["http"]:
                if http["server"]:
                    return dict(http["server"]["items"])
    return {}


def _parts(row: dict[str, Any], record: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    """One request's time, in ms, split into named parts (see BREAKDOWN in the docstring)."""
    ms = 1000.0
    spans: dict[str, list[list[float]]] = {}
    for name, start, end in record["spans"]:
        spans.setdefault(name, []).append([start, end])
    # The provider's request from its send to its first event: on the early-start thread when
    # the request overlapped the hold (`provider_open`), else inside `_first_byte`.
    provider_start, provider_end = spans.get("provider_open", spans["provider_first_byte"])[0]
    sends = record["sends"]
    first_content = next(t for t, kind in sends if kind == "content")
    done_sent = next(t for t, kind in sends if kind == "done")
    end_sent = next(t for t, kind in sends if kind == "end")
    out: dict[str, float] = {
        "added_ttfb": (row["service_ttfb"] - row["direct_ttfb"]) * ms,
        "added_total": (row["service_total"] - row["direct_total"]) * ms,
        "client_to_asgi": (record["asgi_start"] - row["client_start"]) * ms,
        "asgi_to_provider_call": (provider_start - record["asgi_start"]) * ms,
    }
    before = [c for c in record["aws"] if c["start"] < provider_start]
    for call in before:
        op = call["op"].split(":")[1]
        http = call["http"]
        server = [h["server"] for h in http if h["server"]]
        wall = (call["end"] - call["start"]) * ms
        http_wall = sum(h["end"] - h["start"] for h in http) * ms
        server_wall = sum(s["wall"] for s in server) * ms
        out[f"aws.{op}"] = wall
        out[f"aws.{op}.client_botocore"] = wall - http_wall
        out[f"aws.{op}.loopback_http"] = http_wall - server_wall
        out[f"aws.{op}.moto_server"] = server_wall
        out[f"aws.{op}.moto_server_cpu"] = sum(s["cpu"] for s in server) * ms
        if any(s["deepcopy"] for s in server):
            out[f"aws.{op}.moto_deepcopy"] = sum(s["deepcopy"] for s in server) * ms
    aws_before = sum((c["end"] - c["start"]) for c in before) * ms
    hops_before = [h for h in record["hops"] if h[0] < provider_start]
    hop_wait = sum((h[1] - h[0]) + (h[3] - h[2]) for h in hops_before) * ms
    out["aws_before_first_byte"] = aws_before
    out["thread_hops_before_first_byte"] = float(len(hops_before))
    out["thread_hop_wait_before_first_byte"] = hop_wait
    out["service_python_before_provider"] = out["asgi_to_provider_call"] - aws_before - hop_wait
    out["provider_first_byte_in_service"] = (provider_end - provider_start) * ms
    out["provider_first_byte_minus_direct"] = (provider_end - provider_start - row["direct_ttfb"]) * ms
    out["provider_first_byte_to_first_content_sent"] = (first_content - provider_end) * ms
    # The provider's request sent -> the first content sent to the client, less what the
    # provider takes called directly: the relay's own time (its first content is the provider's).
    out["provider_sent_to_first_content_sent"] = (first_content - provider_start) * ms
    out["relay_beyond_direct_ttfb"] = (first_content - provider_start - row["direct_ttfb"]) * ms
    hold = spans.get("hold")
    if hold:  # > 0: the hold committed after the provider's first event, and held it back
        out["hold_end_after_provider_first_event"] = (hold[0][1] - provider_end) * ms
    out["first_content_sent_to_client"] = (row["client_first_content"] - first_content) * ms
    deltas = [h for h in record["hops"] if h[0] >= first_content and h[0] < done_sent]
    out["stream_hops"] = float(len(deltas))
    out["stream_hop_wait_total"] = sum((h[1] - h[0]) + (h[3] - h[2]) for h in deltas) * ms
    out["first_content_to_done_sent"] = (done_sent - first_content) * ms
    out["done_sent_to_client"] = (row["client_done"] - done_sent) * ms
    settle = spans.get("settle", [[0.0, 0.0]])[-1]
    out["settlement_after_done"] = (settle[1] - settle[0]) * ms
    out["done_sent_to_response_end"] = (end_sent - done_sent) * ms
    client_end = row["client_start"] + row["service_end"]
    out["response_end_after_done_client"] = (client_end - row["client_done"]) * ms
    return out


# -- 2. AWS calls on the hot path ---------------------------------------------------------------
def count_calls(requests: int) -> dict[str, Any]:
    os.environ.setdefault("ENVIRONMENT", "local")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }.items():
        os.environ.setdefault(name, value)
    # This process's request log lines would mix with the JSON report on stdout; the local
    # stack started later (its own process) logs as it always does.
    quiet = "POWERTOOLS_LOG_LEVEL" not in os.environ
    if quiet:
        os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
    os.environ.pop("AWS_ENDPOINT_URL", None)
    from fastapi.testclient import TestClient
    from moto import mock_aws

    from batchroute.adapters.aws import client, reset_clients
    from batchroute.config import get_settings
    from batchroute.providers.simulated import SimulatedSyncProvider

    with mock_aws():
        # The in-process count needs no vendor: the in-process simulator answers (the timed
        # runs above go through the real adapters to the emulators of the running stack).
        provision_in_process(
            {"SIMULATED_TTFT_MS": "0", "SIMULATED_INTER_TOKEN_MS": "0", "SIMULATED_PROVIDERS": "1"}
        )
        from functions.api.app import create_app
        from functions.api.auth import identity_store
        from tests.integration.batch_pipeline_support import heartbeat_all_lanes
        from tests.integration.principals import new_org

        identity_store.cache_clear()
        heartbeat_all_lanes()
        org = new_org(credit_usd="100")
        headers = org.key_headers()
        calls: list[str] = []
        before_first_byte: list[list[str]] = []
        per_request: list[int] = []
        original = SimulatedSyncProvider.stream

        def stream(self: SimulatedSyncProvider, request: Any) -> Iterator[Any]:
            before_first_byte.append(list(calls))
            return original(self, request)

        def count(event_name: str, **_: Any) -> None:
            _, service, operation = event_name.split(".")
            calls.append(f"{service}:{operation}")

        SimulatedSyncProvider.stream = stream  # type: ignore[method-assign]
        try:
            with TestClient(create_app(get_settings())) as test_client:
                assert (
                    test_client.post("/v1/chat/completions", json=_body(), headers=headers).status_code == 200
                )
                services = ("dynamodb", "s3", "sqs", "stepfunctions", "kms", "secretsmanager", "ses")
                for service in services:
                    client(service).meta.events.register(f"before-call.{service}", count)
                before_first_byte.clear()
                for _ in range(requests):
                    calls.clear()
                    response = test_client.post("/v1/chat/completions", json=_body(), headers=headers)
                    assert response.status_code == 200, response.text
                    per_request.append(len(calls))
                for service in services:
                    client(service).meta.events.unregister(f"before-call.{service}", count)
        finally:
            SimulatedSyncProvider.stream = original  # type: ignore[method-assign]
            get_settings.cache_clear()
            reset_clients()
            if quiet:
                os.environ.pop("POWERTOOLS_LOG_LEVEL", None)
    hot = [len(c) for c in before_first_byte]
    return {
        "requests": requests,
        "before_first_byte_max": max(hot),
        "before_first_byte": dict(Counter(before_first_byte[-1])),
        "per_request_total_max": max(per_request),
        "lane_state_refresh": "1 dynamodb:Query after an answer, once CHAT_LANE_STATE_TTL_SECONDS passed",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--ttft-ms", type=int, default=150)
    parser.add_argument("--inter-token-ms", type=int, default=15)
    parser.add_argument("--count-requests", type=int, default=20)
    parser.add_argument("--breakdown-rounds", type=int, default=100)
    parser.add_argument(
        "--stock-moto-rounds",
        type=int,
        default=60,
        help="breakdown rounds with moto's own transaction rollback (whole-table copies); 0: skip",
    )
    args = parser.parse_args()
    started = time.time()
    calls = count_calls(args.count_requests)
    latency = measure_latency(args)
    breakdown = measure_breakdown(args) if args.breakdown_rounds else None
    stock = None
    if args.stock_moto_rounds:
        stock = measure_breakdown(
            argparse.Namespace(**{**vars(args), "breakdown_rounds": args.stock_moto_rounds}), stock_moto=True
        )
    report = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
        "settings": {"ttft_ms": args.ttft_ms, "inter_token_ms": args.inter_token_ms},
        "aws_calls": calls,
        "latency": latency,
        "breakdown": breakdown,
        "breakdown_stock_moto_rollback": stock,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(report, indent=2))
    missed = []
    if calls["before_first_byte_max"] > GOAL_CALLS:
        missed.append(f"{calls['before_first_byte_max']} AWS calls before the first byte (goal {GOAL_CALLS})")
    for name in ("ttfb", "total"):
        if latency["added"][name]["p50_ms"] > GOAL_ADDED_MS:
            missed.append(f"p50 added {name} {latency['added'][name]['p50_ms']} ms (goal {GOAL_ADDED_MS} ms)")
    for line in missed:
        print(f"GOAL MISSED: {line}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
