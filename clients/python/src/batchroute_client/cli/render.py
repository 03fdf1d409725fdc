"""How the CLI shows things: rich tables for people, plain JSON for scripts (`--json`: one
JSON document, or JSON Lines for row listings, on stdout and nothing else there)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from batchroute_client.cli.inputs import item_index
from batchroute_client.errors import APIError, UnexpectedResponse
from batchroute_client.models import (
    Batch,
    BillingReceipt,
    GoldenSetRun,
    Item,
    Money,
    Preset,
    PresetTemplate,
    PresetVersion,
    Quote,
    Schedule,
    ScheduleRun,
    Usage,
)
from batchroute_client.money import money_text

STATE_STYLES = {
    "completed": "green",
    "passed": "green",
    "failed": "red",
    "expired": "red",
    "canceled": "yellow",
}


def out(width: int | None = None) -> Console:
    """stdout; `width` None: the terminal's (see `Runtime.columns` for a pipe)."""
    return Console(soft_wrap=False, highlight=False, width=width)


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
        return value.text
    return money_text(str(value.get("amount")), str(value.get("currency") or ""))


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLES.get(name, "cyan"))


def counts_text(batch: Batch) -> str:
    c = batch.counts
    return (
        f"{c.done}/{c.total} done: {c.completed} completed, {c.failed} failed, {c.canceled} canceled,"
        f" {c.running} running, {c.pending} pending"
    )


def error_line(exc: APIError, locate: Callable[[str], str | None] | None = None) -> str:
    """`error: <code>: <message>`, then the details a person needs: preflight issues (each
    with the input file's `name:line` of its item when `locate` tells it), the issues of a
    refused request (`path: message`), the field refused, other scalar details and the
    request id. The API never echoes input back, so nothing here repeats a secret."""
    lines = [f"error: {exc.code}: {exc.message}"]
    details = exc.details if isinstance(exc.details, dict) else {}
    preflight = details.get("preflight")
    if isinstance(preflight, dict):
        lines.extend(_preflight_lines(preflight, locate))
    else:
        lines.extend(_detail_lines(details))
    if exc.retry_after is not None:  # a long wait raised at once, or the last after the retries
        lines.append(f"  retry after: {_duration(exc.retry_after)}")
    if exc.request_id:
        lines.append(f"  request id: {exc.request_id}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    """`45 s`, `12 min`, `2 h 5 min`: a wait as a person reads it (rounded up)."""
    whole = max(0, int(-(-seconds // 1)))
    if whole < 120:
        return f"{whole} s"
    minutes = -(-whole // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


def _preflight_lines(
    preflight: Mapping[str, Any], locate: Callable[[str], str | None] | None = None
) -> list[str]:
    lines = []
    issues = [issue for issue in preflight.get("errors") or [] if isinstance(issue, Mapping)]
    for issue in sorted(issues, key=_item_order):  # as the items stand in the file
        where = _at(issue.get("path"), locate)
        lines.append(f"  - {issue.get('category')}/{issue.get('code')}{where}: {issue.get('message')}")
        if issue.get("action"):
            lines.append(f"    {issue['action']}")
    return lines


def _detail_lines(details: Mapping[str, Any]) -> list[str]:
    """A request's issues (`errors` or `issues`: one `path: message` line each), the `field`
    refused (and the `unknown` fields), then the other scalar details as `k=v`."""
    lines: list[str] = []
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
    error = {"status": exc.status, "code": exc.code, "message": exc.message, "details": exc.details}
    if exc.retry_after is not None:
        error["retry_after_seconds"] = exc.retry_after
    return {"error": error}


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


# -- tables that fit ------------------------------------------------------------------------------
# The narrow-table rule (docs/cli.md, "Tables at any width"): a column is either `flex` (prose:
# wrapped between words, at least its longest word, capped at FLEX_MIN_CAP) or kept on one line
# (ids, states, models, numbers, money, times: never wrapped, never cut). When the columns do not
# fit the width, the least important ones (highest `drop`) are left out and the caption names
# them; `--json` always has every field.
FLEX_MIN_CAP = 20


@dataclass(frozen=True)
class Col:
    header: str
    flex: bool = False  # prose that may wrap between words
    drop: int = 0  # 0: always shown; else left out at narrow widths, highest first
    style: str | None = None
    justify: JustifyMethod = "left"


Cell = str | Text


class Grid:
    """A table that fits the width it is drawn at by leaving out its least important columns."""

    def __init__(
        self,
        columns: Sequence[Col],
        rows: Sequence[Sequence[Cell]],
        title: str | None = None,
        plain: bool = False,
    ) -> None:
        self.columns = list(columns)
        self.rows = [list(row) for row in rows]
        self.title = title
        self.plain = plain  # a fields list: no box, no header

    def table(self, console: Console, width: int) -> Table:
        """The table with as many columns as fit `width` (the least important left out first),
        the left-out ones named below it."""
        everything = list(range(len(self.columns)))
        table = self._table(everything)
        if _minimum(console, table) <= width:
            return table
        shown = [i for i in everything if not self.columns[i].drop]
        for candidate in sorted(
            (i for i in everything if self.columns[i].drop), key=lambda i: self.columns[i].drop
        ):
            if _minimum(console, self._table(sorted([*shown, candidate]))) <= width:
                shown = sorted([*shown, candidate])
        table = self._table(shown)
        if self.plain:  # a fields list: its widest word (an id, an amount) must fit beside the names
            names = max((_text_len(row[0]) for row in self.rows), default=0)
            words = max((cell_len(word) for row in self.rows for word in _plain(row[-1]).split()), default=0)
            return table if names + 2 + words <= width else self._stacked()
        if _minimum(console, table) <= width:
            return table
        return self._stacked()  # not even the columns always shown fit: one record a block

    def _stacked(self) -> Table:
        """Every row as a block of `header: value` lines, blocks apart by a blank line: every
        column is shown, and an id or an amount stays on its line wherever it fits beside its
        header (past that it folds onto the next line: never cut)."""
        table = Table(show_header=False, box=None, title=self.title, title_justify="left", pad_edge=False)
        table.add_column(overflow="fold")
        if self.plain:  # a fields list is one record: `name: value` a line
            for name, value in self.rows:
                table.add_row(Text(f"{_plain(name)}: ", style="bold") + _rich(value))
            return table
        for number, row in enumerate(self.rows):
            if number:
                table.add_row("")
            for column, cell in zip(self.columns, row, strict=True):
                label = Text(f"{column.header}: " if column.header else "", style="bold")
                table.add_row(label + _rich(cell))
        return table

    def _table(self, shown: list[int]) -> Table:
        hidden = [column.header for i, column in enumerate(self.columns) if i not in shown]
        caption = f"not shown at this width: {', '.join(hidden)} (see --json)" if hidden else None
        if self.plain:
            table = Table(show_header=False, box=None, title=self.title, title_justify="left", pad_edge=False)
        else:
            table = Table(title=self.title, title_justify="left", caption=caption, caption_justify="left")
        for i in shown:
            column = self.columns[i]
            cells: list[Cell] = [row[i] for row in self.rows]
            if not self.plain:
                cells.append(column.header)
            table.add_column(
                column.header,
                style=column.style,
                justify=column.justify,
                no_wrap=not column.flex,
                overflow="fold",
                min_width=_least(cells, column.flex),
            )
        for row in self.rows:
            table.add_row(*(row[i] for i in shown))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(console, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table(console, options.max_width))


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _rich(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _text_len(cell: Cell) -> int:
    return max((cell_len(line) for line in _plain(cell).splitlines()), default=0)


def _least(cells: Iterable[Cell], flex: bool) -> int:
    """The narrowest a column may be: its longest word (capped) when it wraps, else its longest line."""
    texts = [cell.plain if isinstance(cell, Text) else cell for cell in cells]
    if flex:
        return min(FLEX_MIN_CAP, max((cell_len(word) for text in texts for word in text.split()), default=1))
    return max((cell_len(line) for text in texts for line in text.splitlines() or [""]), default=1) or 1


def _minimum(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(10_000), table).minimum


def fields_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> Grid:
    listed = [
        (name, value if isinstance(value, Text) else str(value if value is not None else "-"))
        for name, value in rows
    ]
    return Grid([Col("field", style="bold"), Col("value", flex=True)], listed, title=title, plain=True)


def batch_view(batch: Batch) -> Grid:
    # A canceled (failed, expired) batch is terminal at once; it settles once its work ends.
    settling = "not yet: the work already dispatched is finishing" if batch.is_terminal else None
    # why it failed (`execution_summary.latest_error`), only when there is an error to show
    error = [("error", batch.latest_error)] if batch.latest_error else []
    return fields_table(
        [
            ("batch", batch.id),
            ("state", state(batch.state)),
            ("items", counts_text(batch)),
            *error,
            ("created", batch.created_at),
            ("deadline", batch.deadline_at),
            ("completed", batch.completed_at),
            ("settled", batch.settled_at or settling),
            ("routing", f"{batch.routing_mode or '-'} / privacy {batch.privacy_tier or '-'}"),
            ("quote", batch.quote_id),
        ]
    )


def batches_table(batches: Iterable[Batch]) -> Grid:
    columns = [Col("id"), Col("state"), Col("done/total"), Col("failed", drop=2), Col("created", drop=1)]
    rows: list[list[Cell]] = []
    for batch in batches:
        c = batch.counts
        rows.append(
            [batch.id, state(batch.state), f"{c.done}/{c.total}", str(c.failed), batch.created_at or "-"]
        )
    return Grid(columns, rows, title="Batches")


def schedule_view(schedule: Schedule) -> Grid:
    excluded = [f"{lane.lane_id} (score {lane.score})" for lane in schedule.excluded_lanes]
    source = schedule.input_source
    return fields_table(
        [
            ("schedule", schedule.id),
            ("name", schedule.name),
            ("state", state(schedule.state)),
            ("expression", f"{schedule.expression} ({schedule.time_zone})"),
            ("next fire", schedule.next_fire_at or "-"),
            ("last fire", schedule.last_fire_at or "-"),
            ("input", source.get("file_id") or f"{source.get('delivery_target_id')}/{source.get('prefix')}"),
            ("version", str(schedule.version)),
            *([("golden set", schedule.golden_set.get("model"))] if schedule.golden_set else []),
            *([("excluded", ", ".join(excluded))] if excluded else []),
        ]
    )


def schedules_table(schedules: Iterable[Schedule]) -> Grid:
    columns = [Col("id"), Col("name"), Col("state"), Col("expression", drop=2), Col("next fire", drop=1)]
    rows: list[list[Cell]] = [
        [s.id, s.name, state(s.state), f"{s.expression} ({s.time_zone})", s.next_fire_at or "-"]
        for s in schedules
    ]
    return Grid(columns, rows, title="Schedules")


def benchmark_table(run: GoldenSetRun) -> Grid:
    """A golden-set run's score per lane, as its title says when and at what threshold."""
    columns = [
        Col("lane", flex=True),
        Col("score", justify="right"),
        Col("passed"),
        Col("items", justify="right", drop=1),
        Col("errors", drop=2),
        Col("cost", justify="right"),
    ]
    rows: list[list[Cell]] = [
        [
            lane.lane_id,
            f"{lane.score:.2f}",
            state("passed" if lane.passed else "failed"),
            f"{lane.items_passed}/{lane.items_total}",
            ", ".join(sorted({e.get("code", "") for e in lane.errors})) or "-",
            money(lane.cost),
        ]
        for lane in run.lanes
    ]
    title = f"{run.regression_id}: version {run.version}, threshold {run.threshold}"
    return Grid(columns, rows, title=f"{title}, charged {money(run.charged)}")


def preset_view(preset: PresetTemplate) -> Grid:
    """A preset (or one version of it): what items naming it get."""
    archived = getattr(preset, "archived_at", None)
    golden = preset.golden_set or {}
    golden_line = f"{len(golden.get('items') or [])} items on {golden.get('model')}"
    return fields_table(
        [
            ("preset", preset.ref),
            ("state", state("archived" if archived else "active")),
            ("model", _preset_model(preset)),
            ("operation", preset.operation or "-"),
            ("system prompt", shorten(preset.system_prompt or "-", 80)),
            *([("description", preset.description)] if preset.description else []),
            ("parameters", _set_fields(preset.parameters)),
            ("routing", _set_fields(preset.routing)),
            *([("golden set", golden_line)] if golden else []),
            ("created", preset.created_at),
        ]
    )


def _preset_model(preset: PresetTemplate) -> str:
    return preset.model or f"workflow {preset.workflow_product}"


def _set_fields(model: Any) -> str:
    """A model's fields that are set, as `key=JSON` pairs."""
    given = {k: v for k, v in dataclasses.asdict(model).items() if v is not None}
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in given.items()) or "-"


def presets_table(presets: Iterable[Preset]) -> Grid:
    columns = [Col("name"), Col("version", justify="right"), Col("model", flex=True), Col("state", drop=1)]
    rows: list[list[Cell]] = [
        [p.name, str(p.latest_version), _preset_model(p), state("archived" if p.archived_at else "active")]
        for p in presets
    ]
    return Grid(columns, rows, title="Presets")


def preset_versions_table(versions: Iterable[PresetVersion]) -> Grid:
    columns = [Col("ref"), Col("model", flex=True), Col("created", drop=1), Col("by", drop=2)]
    rows: list[list[Cell]] = [[v.ref, _preset_model(v), v.created_at, v.created_by or "-"] for v in versions]
    return Grid(columns, rows, title="Versions")


def runs_table(runs: Iterable[ScheduleRun]) -> Grid:
    columns = [Col("fire time"), Col("state"), Col("batch / error", flex=True), Col("trigger", drop=1)]
    rows: list[list[Cell]] = []
    for run in runs:
        outcome = run.batch_id or (f"{run.error.code}: {run.error.message}" if run.error else "-")
        rows.append([run.fire_at, state(run.state), outcome, run.trigger])
    return Grid(columns, rows, title="Runs")


def items_table(items: Iterable[Item]) -> Grid:
    columns = [
        Col("#", justify="right"),
        Col("customer_item_id"),
        Col("status"),
        Col("model", drop=2),
        Col("provider", drop=1),
        Col("output / error", flex=True),
    ]
    rows: list[list[Cell]] = []
    for item in items:
        detail = item.output_preview or ""
        if item.error:
            detail = f"{item.error.get('code', '')}: {item.error.get('message', '')}"
        rows.append(
            [
                str(item.sequence_number),
                item.customer_item_id or "-",
                state(item.status),
                item.model or "-",
                item.provider or "-",
                shorten(detail, 60),
            ]
        )
    return Grid(columns, rows, title="Items")


def shorten(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut between words with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def quote_view(quote: Quote, locate: Callable[[str], str | None] | None = None) -> list[Any]:
    """The quote as a person reads it; `locate` names the input file's line of an item a
    preflight warning is about."""
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
            *_funding(quote.raw.get("funding")),
        ]
    )
    columns = [
        Col(""),
        Col("provider"),
        Col("model"),
        Col("items", drop=2, justify="right"),
        Col("estimated cost", drop=1),
        Col("rejected because", flex=True),
    ]
    rows: list[list[Cell]] = []
    for lane in quote.quote_lanes:
        rejection = lane.get("rejection") or {}
        rows.append(
            [
                Text("✓", style="green") if lane.get("selected") else Text("✗", style="red"),
                str(lane.get("provider") or "-"),
                str(lane.get("model") or "-"),
                str(lane.get("item_count") or ("-" if not lane.get("selected") else 0)),
                money(lane.get("estimated_provider_cost")) if lane.get("selected") else "-",
                _rejection(rejection),
            ]
        )
    warnings = (quote.raw.get("preflight") or {}).get("warnings") or []
    return [
        summary,
        Grid(columns, rows, title="Lanes"),
        Text(quote.customer_explanation),
        *(_warning(warning, locate) for warning in warnings if isinstance(warning, Mapping)),
    ]


def _funding(funding: object) -> list[tuple[str, Any]]:
    """The quote's `funding` as a row: the balance, and whether it covers the total."""
    if not isinstance(funding, Mapping) or "available" not in funding:
        return []
    enough = funding.get("sufficient")
    verdict = Text(" (enough)", style="green") if enough else Text(" (not enough: top up first)", style="red")
    return [("available", Text(money(funding.get("available"))) + verdict)]


def _item_order(issue: Mapping[str, Any]) -> float:
    """An issue's place in the input: its item's index; an issue of no one item after them
    (the service lists each item's own problems first, then what a model group's checks found)."""
    index = item_index(str(issue.get("path") or ""))
    return index if index is not None else float("inf")


def _at(path: object, locate: Callable[[str], str | None] | None) -> str:
    """` (items[2].model, items.jsonl:4)`: an issue's path and, when `locate` tells it, the
    input file's line of its item; ` (path)` alone otherwise; nothing without a path."""
    if not path:
        return ""
    line = locate(str(path)) if locate is not None else None
    return f" ({path}, {line})" if line else f" ({path})"


def _warning(warning: Mapping[str, Any], locate: Callable[[str], str | None] | None) -> Text:
    """A preflight warning (a spending limit the batch would pass, a lane short of window)."""
    where = _at(warning.get("path"), locate)
    return Text(f"warning: {warning.get('code')}{where}: {warning.get('message') or ''}", style="yellow")


def _rejection(rejection: Mapping[str, Any]) -> str:
    if not rejection:
        return ""
    code = str(rejection.get("code") or "")
    reasons = [r for r in rejection.get("reasons") or [] if r != code]
    extra = f" (also: {', '.join(reasons)})" if reasons else ""
    # An `outranked` lane's message says what beat it: the price, or the tie-break at the same price.
    message = f": {rejection['message']}" if rejection.get("message") else ""
    return f"{code}{message}{extra}"


def receipt_view(receipt: BillingReceipt) -> list[Any]:
    summary = fields_table(
        [
            ("batch", receipt.batch_id),
            ("settled", receipt.settled_at),
            ("final price", Text(money(receipt.final_settled_price), style="bold")),
            ("provider subtotal", money(receipt.provider_subtotal)),
            ("service fee", money(receipt.service_fee)),
            ("fee basis", (receipt.service_fee_basis or {}).get("schedule_line")),
            ("credit reserved", money(receipt.credit_reserved)),
            ("credit charged", money(receipt.credit_charged)),
            ("credit released", money(receipt.credit_released)),
            *_savings_rows(receipt.savings),
        ]
    )
    chosen_columns = [
        Col("provider"),
        Col("model"),
        Col("status", drop=1),
        Col("items", flex=True),
        Col("cost"),
        Col("failover from", drop=2),
    ]
    chosen: list[list[Cell]] = []
    for lane in receipt.provider_lanes:
        chosen.append(
            [
                str(lane.get("provider") or "-"),
                str(lane.get("model") or "-"),
                str(lane.get("status") or "-"),
                _lane_counts(lane.get("item_counts") or {}),
                money(lane.get("cost")),
                str(lane.get("failover_from") or ""),
            ]
        )
    rejected = [
        [
            str(lane.get("provider") or "-"),
            str(lane.get("model") or "-"),
            _rejection(lane.get("rejection") or {}),
        ]
        for lane in receipt.rejected_lanes
    ]
    views: list[Any] = [
        summary,
        Grid(chosen_columns, chosen, title="Lanes chosen"),
        Grid([Col("provider"), Col("model"), Col("reason", flex=True)], rejected, title="Lanes rejected"),
    ]
    if receipt.rescues:
        views.append(_rescues_view(receipt.rescues))
    return views


_RESCUE_REASONS = {"deadline_rescue": "deadline rescue", "deadline_rescue_rest": "kept by the old lane"}


def _rescues_view(rescues: list[dict[str, Any]]) -> Grid:
    """The items a deadline rescue moved, by lane: why, what it cost over the quoted prices and
    (allow_overage) the overage hold it took."""
    rows: list[list[Cell]] = [
        [
            str(entry.get("lane_id") or "-"),
            str(entry.get("from_lane_key") or "-"),
            _RESCUE_REASONS.get(str(entry.get("reason")), str(entry.get("reason") or "-")),
            _lane_counts(entry.get("item_counts") or {}),
            money(entry.get("cost")),
            money(entry.get("cost_difference")),
            _overage(entry),
        ]
        for entry in rescues
    ]
    columns = [
        Col("lane", flex=True),
        Col("from", drop=2),
        Col("reason"),
        Col("items"),
        Col("cost"),
        Col("vs quoted", drop=1),
        Col("overage", drop=3),
    ]
    return Grid(columns, rows, title="Rescued items")


def _overage(entry: Mapping[str, Any]) -> str:
    """allow_overage: the rescue's second hold on the wallet and what was charged of it."""
    if not entry.get("overage_held"):
        return "-"
    return f"{money(entry.get('overage_charged'))} of {money(entry.get('overage_held'))} held"


def _savings_rows(savings: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """What routing saved (docs/routing.md): the charge beside the reference prices."""
    if not savings:
        return []
    return [
        ("at reference list", money(savings.get("reference_list_price"))),
        ("at reference batch", money(savings.get("reference_batch_price"))),
        ("saved vs list", Text(money(savings.get("saved_vs_list_price")), style="bold")),
        ("saved vs batch", money(savings.get("saved_vs_batch_price"))),
        ("reference prices of", str(savings.get("prices_as_of") or "")[:10]),
    ]


def _lane_counts(counts: Mapping[str, Any]) -> str:
    """`2 completed, 1 failed` (the counts that are not zero), or `0`."""
    shown = [
        f"{counts.get(name, 0)} {name}" for name in ("completed", "failed", "canceled") if counts.get(name)
    ]
    return ", ".join(shown) or "0"


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
    columns = [
        Col("period"),
        Col("dates", drop=1),
        Col("spend"),
        Col("tokens", drop=2),
        Col("requests", drop=3),
    ]
    rows: list[list[Cell]] = []
    for name, period in (("current", usage.current_period), ("previous", usage.previous_period)):
        tokens = period.get("tokens") or {}
        requests = period.get("requests") or {}
        rows.append(
            [
                name,
                f"{period.get('start_date', '-')} .. {period.get('end_date', '-')}",
                money(period.get("spend")),
                str(tokens.get("total", 0)),
                str(requests.get("total", 0)),
            ]
        )
    return [summary, Grid(columns, rows, title="Spend")]
