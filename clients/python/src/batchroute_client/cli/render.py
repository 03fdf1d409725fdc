"""How the CLI shows things: rich tables for people, plain JSON for scripts (`--json`: one
JSON document, or JSON Lines for row listings, on stdout and nothing else there)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from batchroute_client.errors import APIError, UnexpectedResponse
from batchroute_client.models import Batch, BillingReceipt, Item, Money, Quote, Usage

STATE_STYLES = {"completed": "green", "failed": "red", "expired": "red", "canceled": "yellow"}


def out() -> Console:
    return Console(soft_wrap=False, highlight=False)


def err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def emit_jsonl(row: Any) -> None:
    sys.stdout.write(json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")


def as_dict(value: Any) -> Any:
    """A model as the service sent it (`raw`), or its fields."""
    raw = getattr(value, "raw", None)
    if isinstance(raw, dict) and raw:
        return raw
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def money(value: Money | Mapping[str, Any] | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, Money):
        return f"{value.amount} {value.currency.upper()}"
    return f"{value.get('amount')} {str(value.get('currency') or '').upper()}"


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLES.get(name, "cyan"))


def counts_text(batch: Batch) -> str:
    c = batch.counts
    return (
        f"{c.done}/{c.total} done: {c.completed} completed, {c.failed} failed, {c.canceled} canceled,"
        f" {c.running} running, {c.pending} pending"
    )


def error_line(exc: APIError) -> str:
    """`error: <code>: <message>`, then the details a person needs: preflight issues, the
    issues of a refused request (`path: message`), the field refused, other scalar details and
    the request id. The API never echoes input back, so nothing here repeats a secret."""
    lines = [f"error: {exc.code}: {exc.message}"]
    details = exc.details if isinstance(exc.details, dict) else {}
    preflight = details.get("preflight")
    if isinstance(preflight, dict):
        lines.extend(_preflight_lines(preflight))
    else:
        lines.extend(_detail_lines(details))
    if exc.request_id:
        lines.append(f"  request id: {exc.request_id}")
    return "\n".join(lines)


def _preflight_lines(preflight: Mapping[str, Any]) -> list[str]:
    lines = []
    for issue in preflight.get("errors") or []:
        where = f" ({issue.get('path')})" if issue.get("path") else ""
        lines.append(f"  - {issue.get('category')}/{issue.get('code')}{where}: {issue.get('message')}")
        if issue.get("action"):
            lines.append(f"    {issue['action']}")
    return lines


def _detail_lines(details: Mapping[str, Any]) -> list[str]:
    """A request's issues (`errors` or `issues`: one `path: message` line each), the `field`
    refused (and the `unknown` fields), then the other scalar details as `k=v`."""
    lines = []
    for name in ("errors", "issues"):
        issues = details.get(name)
        if isinstance(issues, list):
            lines.extend(_issue_line(issue) for issue in issues)
    if details.get("field"):
        lines.append(f"  field: {details['field']}")
    unknown = details.get("unknown")
    if isinstance(unknown, list) and unknown:
        lines.append(f"  unknown fields: {', '.join(str(name) for name in unknown)}")
    shown = ", ".join(
        f"{k}={v}"
        for k, v in details.items()
        if k not in ("errors", "issues", "field", "unknown") and not isinstance(v, (dict, list))
    )
    if shown:
        lines.append(f"  details: {shown}")
    return lines


def _issue_line(issue: Any) -> str:
    if not isinstance(issue, Mapping):
        return f"  - {issue}"
    where = issue.get("path") or issue.get("field")
    if not where and issue.get("line") is not None:
        where = f"line {issue['line']}"
    message = issue.get("message") or issue.get("code") or "invalid"
    return f"  - {where}: {message}" if where else f"  - {message}"


def error_document(exc: APIError) -> dict[str, Any]:
    return {"error": {"status": exc.status, "code": exc.code, "message": exc.message, "details": exc.details}}


def unexpected_document(exc: UnexpectedResponse) -> dict[str, Any]:
    """The `--json` error document of an answer that is not the API's JSON, shaped as an API
    error's: code `unexpected_response`, the URL and content type in `details`."""
    details = {"method": exc.method, "url": exc.url, "content_type": exc.content_type}
    return {
        "error": {
            "status": exc.status,
            "code": "unexpected_response",
            "message": str(exc),
            "details": details,
        }
    }


def fields_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> Table:
    table = Table(show_header=False, box=None, title=title, title_justify="left", pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for name, value in rows:
        table.add_row(name, value if isinstance(value, Text) else str(value if value is not None else "-"))
    return table


def batch_view(batch: Batch) -> Table:
    return fields_table(
        [
            ("batch", batch.id),
            ("state", state(batch.state)),
            ("items", counts_text(batch)),
            ("created", batch.created_at),
            ("deadline", batch.deadline_at),
            ("completed", batch.completed_at),
            ("routing", f"{batch.routing_mode or '-'} / privacy {batch.privacy_tier or '-'}"),
            ("quote", batch.quote_id),
        ]
    )


def batches_table(batches: Iterable[Batch]) -> Table:
    table = Table(title="Batches", title_justify="left")
    table.add_column("id", no_wrap=True)
    for name in ("state", "done/total", "failed", "created"):
        table.add_column(name)
    for batch in batches:
        c = batch.counts
        table.add_row(batch.id, state(batch.state), f"{c.done}/{c.total}", str(c.failed), batch.created_at)
    return table


def items_table(items: Iterable[Item]) -> Table:
    table = Table(title="Items", title_justify="left")
    for name in ("#", "customer_item_id", "status", "model", "provider", "output / error"):
        table.add_column(name, overflow="fold")
    for item in items:
        detail = item.output_preview or ""
        if item.error:
            detail = f"{item.error.get('code', '')}: {item.error.get('message', '')}"
        table.add_row(
            str(item.sequence_number),
            item.customer_item_id or "-",
            state(item.status),
            item.model or "-",
            item.provider or "-",
            detail[:60],
        )
    return table


def quote_view(quote: Quote) -> list[Any]:
    price = quote.pricing_estimate
    summary = fields_table(
        [
            ("quote", quote.quote_id),
            ("expires", quote.expires_at),
            ("items", quote.item_count),
            ("provider subtotal", money(price.provider_subtotal)),
            ("service fee", money(price.service_fee)),
            ("discount", money(price.customer_discount)),
            ("total", Text(money(price.total), style="bold")),
        ]
    )
    lanes = Table(title="Lanes", title_justify="left")
    for name in ("", "provider", "model", "items", "estimated cost", "rejected because"):
        lanes.add_column(name, overflow="fold")
    for lane in quote.quote_lanes:
        rejection = lane.get("rejection") or {}
        lanes.add_row(
            Text("✓", style="green") if lane.get("selected") else Text("✗", style="red"),
            str(lane.get("provider") or "-"),
            str(lane.get("model") or "-"),
            str(lane.get("item_count") or ("-" if not lane.get("selected") else 0)),
            money(lane.get("estimated_provider_cost")) if lane.get("selected") else "-",
            _rejection(rejection),
        )
    return [summary, lanes, Text(quote.customer_explanation)]


def _rejection(rejection: Mapping[str, Any]) -> str:
    if not rejection:
        return ""
    code = str(rejection.get("code") or "")
    reasons = [r for r in rejection.get("reasons") or [] if r != code]
    extra = f" (also: {', '.join(reasons)})" if reasons else ""
    # `outranked` lanes were eligible: their message only compares prices, shown by --json.
    message = "" if code == "outranked" else f": {rejection.get('message')}"
    return f"{code}{message}{extra}"


def receipt_view(receipt: BillingReceipt) -> list[Any]:
    summary = fields_table(
        [
            ("batch", receipt.batch_id),
            ("settled", receipt.settled_at),
            ("final price", Text(money(receipt.final_settled_price), style="bold")),
            ("provider subtotal", money(receipt.provider_subtotal)),
            ("service fee", money(receipt.service_fee)),
            ("credit reserved", money(receipt.credit_reserved)),
            ("credit charged", money(receipt.credit_charged)),
            ("credit released", money(receipt.credit_released)),
        ]
    )
    chosen = Table(title="Lanes chosen", title_justify="left")
    for name in ("provider", "model", "status", "completed", "failed", "canceled", "cost", "failover from"):
        chosen.add_column(name, overflow="fold")
    for lane in receipt.provider_lanes:
        counts = lane.get("item_counts") or {}
        chosen.add_row(
            str(lane.get("provider") or "-"),
            str(lane.get("model") or "-"),
            str(lane.get("status") or "-"),
            str(counts.get("completed", 0)),
            str(counts.get("failed", 0)),
            str(counts.get("canceled", 0)),
            money(lane.get("cost")),
            str(lane.get("failover_from") or ""),
        )
    rejected = Table(title="Lanes rejected", title_justify="left")
    for name in ("provider", "model", "reason"):
        rejected.add_column(name, overflow="fold")
    for lane in receipt.rejected_lanes:
        rejected.add_row(
            str(lane.get("provider") or "-"),
            str(lane.get("model") or "-"),
            _rejection(lane.get("rejection") or {}),
        )
    return [summary, chosen, rejected]


def usage_view(usage: Usage) -> list[Any]:
    summary = fields_table(
        [
            ("organization", usage.org_id),
            ("balance", money(usage.balance)),
            ("reserved", money(usage.reserved)),
            ("available", Text(money(usage.available), style="bold")),
            ("period", f"{usage.period} ({usage.timezone})"),
        ]
    )
    periods = Table(title="Spend", title_justify="left")
    for name in ("period", "dates", "spend", "tokens", "requests"):
        periods.add_column(name)
    for name, period in (("current", usage.current_period), ("previous", usage.previous_period)):
        tokens = period.get("tokens") or {}
        requests = period.get("requests") or {}
        periods.add_row(
            name,
            f"{period.get('start_date', '-')} .. {period.get('end_date', '-')}",
            money(period.get("spend")),
            str(tokens.get("total", 0)),
            str(requests.get("total", 0)),
        )
    return [summary, periods]
