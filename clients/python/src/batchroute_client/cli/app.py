"""The `batchroute` commands (docs/cli.md). Each command is a thin layer over the client:
errors are raised as they come and turned into messages and exit codes in `main`."""

from __future__ import annotations

import itertools
import json
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.console import Group

from batchroute_client.cli import render
from batchroute_client.cli import runtime as rt
from batchroute_client.cli.config import ConfigError, load, mask, save
from batchroute_client.cli.inputs import Converted, convert, read_items
from batchroute_client.cli.progress import BatchBar, UploadBar
from batchroute_client.client import Client
from batchroute_client.errors import APIConnectionError, APIError, UnexpectedResponse
from batchroute_client.models import Batch, Quote

# Inline items up to 3 MiB of JSONL: the JSON body cap is 4 MiB (docs/limits.md) and the
# inline body re-encodes the items; anything larger is uploaded as a file (direct up to
# 4 MiB, the signed URL above) and quoted by `input_file_id`.
INLINE_MAX_BYTES = 3 * 1024 * 1024
ROW_STATUSES = ("pending", "processing", "completed", "failed")
# The attribute of an error raised after `submit` created its batch: `{"batch", "idempotency_key"}`,
# which `main` puts beside the error in the --json document, so a script keeps the batch's id.
CREATED = "batchroute_created"


class BatchEnded(Exception):
    """`--wait` saw the batch end other than completed (exit 4)."""

    def __init__(self, batch: Batch) -> None:
        reason = f"; latest error: {batch.latest_error}" if batch.latest_error else ""
        super().__init__(f"{batch.id} ended {batch.state}: {render.counts_text(batch)}{reason}")
        self.batch = batch


@dataclass
class Globals:
    base_url: str | None = None
    json: bool = False


app = typer.Typer(
    name="batchroute",
    help="Route batches of AI requests: quote, submit, follow and fetch results (docs/cli.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine output (JSON) on stdout only.")]
FileArg = Annotated[
    Path,
    typer.Argument(
        help="Items as JSONL: native items or vendor batch lines ({custom_id, method, url, body})."
    ),
]
RoutingOpt = Annotated[
    str | None,
    typer.Option("--routing-mode", help="cheapest, sla_aware, public_only, edge_only, hybrid, ..."),
]
PrivacyOpt = Annotated[
    str | None, typer.Option("--privacy-tier", help="standard, confidential or restricted.")
]
ToolsOpt = Annotated[
    list[str] | None, typer.Option("--tool", help="A hosted tool every lane must offer (repeatable).")
]
UploadOpt = Annotated[
    str,
    typer.Option(
        "--upload",
        help="auto: inline up to 3 MiB, else a file upload; inline; direct; signed (the signed-URL upload).",
    ),
]


@app.callback()
def root(
    ctx: typer.Context,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="The API's base URL (else BATCHROUTE_BASE_URL or the config)."),
    ] = None,
    json_mode: JsonOpt = False,
) -> None:
    ctx.obj = Globals(base_url=base_url, json=json_mode)


def _globals(ctx: typer.Context) -> Globals:
    return ctx.obj if isinstance(ctx.obj, Globals) else Globals()


def client_of(ctx: typer.Context) -> Client:
    """The client of this run's settings (the key and base URL it requires)."""
    api_key, base_url = rt.CURRENT.settings(_globals(ctx).base_url).require()
    return rt.CURRENT.client(api_key, base_url)


def _json(ctx: typer.Context, flag: bool) -> bool:
    return flag or _globals(ctx).json


def _show(*renderables: Any) -> None:
    render.out(rt.CURRENT.columns()).print(Group(*renderables))


def json_object(path: Path, option: str) -> dict[str, Any]:
    """The JSON object a file given as `option` holds (the API checks its fields); a usage
    error (exit 2) for a file that cannot be read or holds something else."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise typer.BadParameter(f"{path}: not a readable JSON file ({exc})", param_hint=option) from exc
    if not isinstance(document, dict):
        raise typer.BadParameter(f"{path}: not a JSON object", param_hint=option)
    return document


def answer(ctx: typer.Context, json_flag: bool, document: Any, *renderables: Any) -> None:
    """`document` as JSON with --json, else the renderables."""
    if _json(ctx, json_flag):
        render.emit_json(document)
    else:
        _show(*renderables)


def benchmark_runs(ctx: typer.Context, json_flag: bool, runs: Any, version: int) -> None:
    """A version's golden-set runs (a schedule's or a preset's): the list as JSON with --json,
    else a table of scores per lane for each run."""
    tables = [render.benchmark_table(run) for run in runs.data]
    none = render.fields_table([("benchmarks", f"no golden-set run of version {version} yet")])
    answer(ctx, json_flag, render.as_dict(runs), *(tables or [none]))


# -- configuration --------------------------------------------------------------------------------
@app.command()
def login(
    ctx: typer.Context,
    base_url: Annotated[str | None, typer.Option("--base-url", help="The API's base URL to store.")] = None,
    json_mode: JsonOpt = False,
) -> None:
    """Ask for an API key (hidden), check it against the API and store it (0600)."""
    settings = rt.CURRENT.settings(base_url or _globals(ctx).base_url)
    url = settings.base_url or str(typer.prompt("Base URL")).rstrip("/")
    key = rt.CURRENT.prompt_key().strip()
    if not key:
        raise ConfigError("no API key given")
    with rt.CURRENT.client(key, url) as client:
        account = client.account()
    stored = load(settings.path)
    save(settings.path, {**stored, "api_key": key, "base_url": url})
    org = account["org"]
    summary = {"base_url": url, "org_id": org.get("id") or org.get("org_id"), "api_key": mask(key)}
    if _json(ctx, json_mode):
        render.emit_json({**summary, "config": str(settings.path)})
        return
    render.out().print(
        f"Logged in to {url} as {summary['org_id']} with key {mask(key)}; saved to {settings.path}"
    )


@app.command()
def configure(
    ctx: typer.Context,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Store this base URL.")] = None,
    api_key: Annotated[
        bool, typer.Option("--api-key", help="Prompt for an API key (hidden) and store it.")
    ] = False,
    json_mode: JsonOpt = False,
) -> None:
    """Set the stored base URL or API key; with no option, show the configuration (key masked)."""
    settings = rt.CURRENT.settings(None)
    stored = load(settings.path)
    if base_url or api_key:
        if base_url:
            stored["base_url"] = base_url.rstrip("/")
        if api_key:
            key = rt.CURRENT.prompt_key().strip()
            if not key:
                raise ConfigError("no API key given")
            stored["api_key"] = key
        save(settings.path, stored)
        settings = rt.CURRENT.settings(None)
    shown = {
        "config": str(settings.path),
        "base_url": settings.base_url,
        "api_key": mask(settings.api_key),
        "api_key_from": settings.key_source,
    }
    if _json(ctx, json_mode):
        render.emit_json(shown)
        return
    _show(render.fields_table(list(shown.items())))


# -- quoting and submitting -----------------------------------------------------------------------
def _routing(routing_mode: str | None, privacy_tier: str | None, tools: list[str] | None) -> dict[str, Any]:
    options: dict[str, Any] = {
        "routing_mode": routing_mode,
        "privacy_tier": privacy_tier,
        "required_tools": tools,
    }
    return {k: v for k, v in options.items() if v}


def _quote_file(
    client: Client, path: Path, upload: str, options: dict[str, Any], bars: bool, work: IO[bytes]
) -> tuple[Quote, Converted, str | None]:
    """Convert the file, send the items inline or as an uploaded file, and quote them."""
    if upload not in ("auto", "inline", "direct", "signed"):
        raise typer.BadParameter("must be auto, inline, direct or signed", param_hint="--upload")
    converted = convert(path, work)
    work.flush()
    rt.CURRENT.locate = converted.where  # a preflight issue then names its line in `path`
    if upload == "inline" or (upload == "auto" and converted.bytes <= INLINE_MAX_BYTES):
        return client.quotes.model(items=read_items(work), **options), converted, None
    with UploadBar(render.err(), f"upload {path.name}", bars) as bar:
        uploaded = client.files.upload(
            Path(work.name),
            filename=path.with_suffix(".jsonl").name,
            method="auto" if upload == "auto" else upload,  # type: ignore[arg-type]
            on_progress=bar,
        )
    return client.quotes.model(input_file_id=uploaded.id, **options), converted, uploaded.id


@app.command()
def quote(
    ctx: typer.Context,
    file: FileArg,
    routing_mode: RoutingOpt = None,
    privacy_tier: PrivacyOpt = None,
    tool: ToolsOpt = None,
    upload: UploadOpt = "auto",
    json_mode: JsonOpt = False,
) -> None:
    """Price FILE without running it: the total, the lanes chosen and those rejected, and why."""
    json_mode = _json(ctx, json_mode)
    bars = rt.CURRENT.show_bars(json_mode)
    with client_of(ctx) as client, tempfile.NamedTemporaryFile(suffix=".jsonl") as work:
        got, converted, file_id = _quote_file(
            client, file, upload, _routing(routing_mode, privacy_tier, tool), bars, work
        )
    if json_mode:
        render.emit_json({"quote": got.raw, "input": _input_summary(converted, file_id)})
        return
    _show(*render.quote_view(got, converted.where))


def _input_summary(converted: Converted, file_id: str | None) -> dict[str, Any]:
    return {
        "format": converted.format,
        "items": converted.items,
        "bytes": converted.bytes,
        "models": sorted(converted.models),
        "input_file_id": file_id,
    }


@app.command()
def submit(
    ctx: typer.Context,
    file: FileArg,
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the batch until it ends (exit 4 unless completed).")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="With --wait: write <batch_id>.results.jsonl into this folder."),
    ] = None,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", min=0.1, help="Seconds between polls.")
    ] = 2.0,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Give up waiting after this many seconds (exit 3).")
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key", help="Reuse a key to make a repeated submit return the same batch."
        ),
    ] = None,
    routing_mode: RoutingOpt = None,
    privacy_tier: PrivacyOpt = None,
    tool: ToolsOpt = None,
    upload: UploadOpt = "auto",
    json_mode: JsonOpt = False,
) -> None:
    """Quote FILE and create its batch (one Idempotency-Key, reused on every retry)."""
    if out is not None and not wait:
        raise typer.BadParameter("--out needs --wait", param_hint="--out")
    json_mode = _json(ctx, json_mode)
    bars = rt.CURRENT.show_bars(json_mode)
    err = render.err()
    key = idempotency_key or f"br-cli-{uuid.uuid4().hex}"
    with ExitStack() as stack:
        client = stack.enter_context(client_of(ctx))
        work = stack.enter_context(tempfile.NamedTemporaryFile(suffix=".jsonl"))
        got, converted, file_id = _quote_file(
            client, file, upload, _routing(routing_mode, privacy_tier, tool), bars, work
        )
        if not json_mode:
            total = render.money(got.pricing_estimate.total)
            err.print(
                f"{converted.items} items ({converted.format} format) quoted {total} ({got.quote_id})",
                highlight=False,
            )
        try:
            batch = client.batches.create(quote_id=got.quote_id, idempotency_key=key)
        except BaseException as exc:
            if isinstance(exc, APIError) and exc.code == "idempotency_conflict":  # made by an earlier run
                err.print(
                    f"a batch already exists under Idempotency-Key {key} (an earlier run made it "
                    "from another quote); nothing new was created: `batchroute list` shows it",
                    highlight=False,
                )
                setattr(exc, CREATED, {"batch": None, "idempotency_key": key})
            elif _outcome_unknown(exc):  # the batch may exist: a rerun with this key finds it
                err.print(
                    f"the batch may have been created: rerun with --idempotency-key {key} (if it "
                    "was, the rerun is refused with 409 idempotency_conflict, not charged twice; "
                    "`batchroute list` shows it)",
                    highlight=False,
                )
                setattr(exc, CREATED, {"batch": None, "idempotency_key": key})
            raise
        err.print(f"created {batch.id} (Idempotency-Key {key})", highlight=False)  # --json too
        results_file: Path | None = None
        seen = [batch]  # the batch as last read: a --wait that gives up reports what it saw
        try:
            if wait:
                batch = _follow(client, batch, poll_interval, timeout, bars, seen=seen)
                if out is not None:
                    results_file = _write_results(client, batch.id, out / f"{batch.id}.results.jsonl")
        except BaseException as exc:  # the batch exists (and holds credit): name it in the error
            setattr(exc, CREATED, {"batch": seen[-1].raw, "idempotency_key": key})
            raise
    document = {
        "batch": batch.raw,
        "quote_id": got.quote_id,
        "idempotency_key": key,
        "input": _input_summary(converted, file_id),
        "results_file": str(results_file) if results_file else None,
    }
    if json_mode:
        render.emit_json(document)
    else:
        _show(render.batch_view(batch))
        if results_file:
            err.print(f"results written to {results_file}", highlight=False)
    if wait and batch.state != "completed":
        raise BatchEnded(batch)


def _outcome_unknown(exc: BaseException) -> bool:
    """Whether a failed create may still have made the batch: no answer, a 5xx, a 409 of the
    same key still in flight or an answer that is not the API's; any other 4xx made nothing."""
    if isinstance(exc, APIError):
        return exc.status >= 500 or exc.code == "idempotency_in_progress"
    return isinstance(exc, (APIConnectionError, UnexpectedResponse, KeyboardInterrupt))


def _follow(
    client: Client,
    batch: Batch,
    poll_interval: float,
    timeout: float | None,
    bars: bool,
    *,
    seen: list[Batch] | None = None,
) -> Batch:
    """Wait for the batch to settle, showing its progress; `seen` gets each read of it."""
    try:
        with BatchBar(render.err(), bars) as bar:

            def progress(read: Batch) -> None:
                if seen is not None:
                    seen.append(read)
                bar(read)

            return client.batches.wait(
                batch.id, poll_interval=poll_interval, timeout=timeout, on_progress=progress
            )
    except KeyboardInterrupt:
        render.err().print(
            f"stopped waiting; {batch.id} keeps running: batchroute status {batch.id}", highlight=False
        )
        raise


def _write_results(client: Client, batch_id: str, path: Path, body_format: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    with partial.open("w", encoding="utf-8") as handle:
        for row in client.batches.results(batch_id, body_format=body_format, page_size=1000):
            handle.write(json.dumps(render.as_dict(row), ensure_ascii=False, separators=(",", ":")) + "\n")
    partial.replace(path)
    return path


# -- reading batches --------------------------------------------------------------------------------
BatchArg = Annotated[str, typer.Argument(help="The batch id (batch_...).")]


@app.command()
def status(ctx: typer.Context, batch_id: BatchArg, json_mode: JsonOpt = False) -> None:
    """A batch's state and item counts."""
    with client_of(ctx) as client:
        batch = client.batches.get(batch_id)
    answer(ctx, json_mode, {"batch": batch.raw}, render.batch_view(batch))


@app.command("list")
def list_batches(
    ctx: typer.Context,
    state: Annotated[
        str | None,
        typer.Option(
            "--state", help="A batch state (running, completed, ...) or active (every unfinished one)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")] = 20,
    json_mode: JsonOpt = False,
) -> None:
    """Batches, newest first (JSON Lines with --json)."""
    with client_of(ctx) as client:
        rows = client.batches.list(state=state, page_size=min(limit, 100) or 100)
        listing(ctx, json_mode, rows, limit, render.batches_table)


def listing(ctx: typer.Context, json_flag: bool, rows: Iterator[Any], limit: int, table: Any) -> None:
    """At most `limit` rows (0: all), fetched page by page: JSON Lines with --json, else a table."""
    taken = itertools.islice(rows, limit or None)
    if _json(ctx, json_flag):
        for row in taken:
            render.emit_jsonl(render.as_dict(row))
        return
    _show(table(list(taken)))


@app.command()
def items(
    ctx: typer.Context,
    batch_id: BatchArg,
    status: Annotated[
        str | None, typer.Option("--status", help=f"One of: {', '.join(ROW_STATUSES)}.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")] = 100,
    json_mode: JsonOpt = False,
) -> None:
    """A batch's items with their status, provider and output preview or error."""
    with client_of(ctx) as client:
        rows = client.batches.items(batch_id, status=status, page_size=min(limit, 500) or 500)
        listing(ctx, json_mode, rows, limit, render.items_table)


@app.command()
def results(
    ctx: typer.Context,
    batch_id: BatchArg,
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file instead of stdout.")] = None,
    body_format: Annotated[str | None, typer.Option("--format", help="normalized (default) or raw.")] = None,
    artifact: Annotated[
        bool,
        typer.Option(
            "--artifact", help="With --out: download the full results artifact instead of the rows."
        ),
    ] = False,
    json_mode: JsonOpt = False,
) -> None:
    """Every result row as JSON Lines (all pages), to stdout or --out FILE."""
    json_mode = _json(ctx, json_mode)
    if artifact and out is None:
        raise typer.BadParameter("--artifact needs --out", param_hint="--artifact")
    with client_of(ctx) as client:
        if out is None:
            for row in client.batches.results(batch_id, body_format=body_format, page_size=1000):
                render.emit_jsonl(render.as_dict(row))
            return
        if artifact:
            partial = out.with_name(out.name + ".part")
            with partial.open("wb") as handle:
                written = client.batches.download_artifact(batch_id, handle)
            partial.replace(out)
            lines = _count_lines(out)
        else:
            _write_results(client, batch_id, out, body_format)
            written, lines = out.stat().st_size, _count_lines(out)
    if json_mode:
        render.emit_json({"batch_id": batch_id, "file": str(out), "rows": lines, "bytes": written})
    else:
        render.err().print(f"wrote {lines} rows ({written} bytes) to {out}", highlight=False)


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


@app.command()
def receipt(ctx: typer.Context, batch_id: BatchArg, json_mode: JsonOpt = False) -> None:
    """The billing receipt: the price settled, the lanes chosen and the lanes rejected, with reasons."""
    with client_of(ctx) as client:
        got = client.batches.receipt(batch_id)
    answer(ctx, json_mode, got.raw, *render.receipt_view(got))


@app.command()
def cancel(
    ctx: typer.Context,
    batch_id: BatchArg,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (at most 500 characters).")] = None,
    json_mode: JsonOpt = False,
) -> None:
    """Cancel a batch that has not ended."""
    with client_of(ctx) as client:
        batch = client.batches.cancel(batch_id, reason=reason)
    answer(ctx, json_mode, {"batch": batch.raw}, render.batch_view(batch))


@app.command()
def retry(ctx: typer.Context, batch_id: BatchArg, json_mode: JsonOpt = False) -> None:
    """A new batch of the failed and canceled items of an ended batch (beta)."""
    with client_of(ctx) as client:
        got = client.batches.retry(batch_id)
        # A repeated retry (a second run, or the client's own repeat of a lost answer) is answered
        # with the first answer, its batch as it was then, and nothing tells a replay apart
        # (docs/batches.md, "Retry"): the batch is read again so its state is the current one.
        current = client.batches.get(got.batch.id)
    if _json(ctx, json_mode):
        render.emit_json(
            {
                "batch": current.raw,
                "source_batch_id": got.source_batch_id,
                "retry_item_count": got.retry_item_count,
            }
        )
        return
    render.err().print(f"{got.retry_item_count} items of {got.source_batch_id} retried as:", highlight=False)
    _show(render.batch_view(current))


@app.command()
def usage(ctx: typer.Context, json_mode: JsonOpt = False) -> None:
    """The wallet (balance, reserved, available) and the spend of this period and the last."""
    with client_of(ctx) as client:
        got = client.usage()
    answer(ctx, json_mode, got.raw, *render.usage_view(got))


@app.command()
def chat(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(help="An exact catalog model id.")],
    prompt: Annotated[str, typer.Argument(help="The user message.")],
    system: Annotated[str | None, typer.Option("--system", help="A system message.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1)] = None,
    stream: Annotated[
        bool, typer.Option("--stream/--no-stream", help="Print the answer as it arrives.")
    ] = True,
    json_mode: JsonOpt = False,
) -> None:
    """Ask MODEL directly; the answer streams to stdout (the whole completion with --json)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": prompt}
    ]
    options = {"max_tokens": max_tokens} if max_tokens else {}
    json_mode = _json(ctx, json_mode)
    with client_of(ctx) as client:
        if json_mode or not stream:
            answer = client.chat.create(model, messages, **options)
            if json_mode:
                render.emit_json(answer.raw)
            else:
                render.out().print(answer.text, markup=False, highlight=False, soft_wrap=True)
            return
        console = render.out()
        wrote = False
        try:
            for chunk in client.chat.stream(model, messages, **options):
                if chunk.text:
                    console.print(chunk.text, end="", markup=False, highlight=False, soft_wrap=True)
                    console.file.flush()
                    wrote = True
        except BaseException:  # failed midway: end what streamed so far, then the error line
            if wrote:
                console.print()
            raise
        console.print()


__all__ = ["BatchEnded", "app"]
