// One batch: live counts, the routing receipt (selected lanes, the lanes of a deadline rescue,
// and every rejected lane with its reason, as a table and a per-lane chart), items with a status filter, downloads,
// cancel and retry. The page follows the batch until it is settled, not merely terminal: a
// canceled batch's dispatched work may still run, and its results, receipt and retry come
// once that work has ended (docs/console.md, "Cancel").
import { useEffect, useRef, useState } from "react";
import { Link, useNavigate, useParams } from "react-router-dom";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { ApiError, api, call, type Schemas } from "../api/client";
import { TERMINAL_STATES, cacheSplitText, isSettled, money, when } from "../format";
import { BatchProgress, Empty, ErrorLine, Field, LoadMore, Loading, POLL_MS, useLoad, usePaged } from "../components/ui";
import { SavingsFacts } from "../components/Savings";

type Receipt = Schemas["BillingReceipt"];

/** The batch's signed files, by the button that opens each. */
const FILES = [
  ["output_url", "Result file"],
  ["error_url", "Error file"],
  ["receipt_url", "Receipt file"],
] as const;
type FileField = (typeof FILES)[number][0];

export function Batch() {
  // Keyed by the id: opening another batch (the retry's new one) starts from "Loading", never
  // from the previous batch's state, counts and filters drawn under the new address.
  const { batchId = "" } = useParams();
  return <BatchPage key={batchId} batchId={batchId} />;
}

function BatchPage({ batchId }: { batchId: string }) {
  const navigate = useNavigate();
  const read = useLoad(
    () =>
      call(
        api.GET("/v1/batches/{batch_id}", {
          params: { path: { batch_id: batchId }, query: { include_billing_receipt: true } },
        }),
      ),
    [batchId],
  );
  const [error, setError] = useState<unknown>(null);
  const batch = read.data?.batch;
  const active = batch ? !TERMINAL_STATES.includes(batch.state) : false;
  const settled = batch ? isSettled(batch) : false;
  const following = batch !== undefined && !settled;
  useEffect(() => {
    if (!following) return;
    const timer = window.setInterval(() => void read.reload(), POLL_MS);
    return () => window.clearInterval(timer);
  }, [following, read.reload]);

  async function cancel() {
    if (!window.confirm("Cancel this batch? Work already dispatched may still finish.")) return;
    try {
      await call(api.POST("/v1/batches/{batch_id}/cancel", { params: { path: { batch_id: batchId } }, body: {} }));
      await read.reload();
    } catch (caught) {
      setError(caught);
    }
  }
  async function retry() {
    try {
      const created = (await call(api.POST("/v1/batches/{batch_id}/retry", { params: { path: { batch_id: batchId } } }))) as {
        batch?: { id?: string };
      };
      if (created.batch?.id) navigate(`/batches/${created.batch.id}`);
    } catch (caught) {
      setError(caught);
    }
  }
  // A file's URL is signed for 15 minutes and a settled batch is no longer polled: each click
  // reads the batch again for a freshly signed URL, then goes there.
  async function openFile(field: FileField) {
    try {
      const fresh = await call(api.GET("/v1/batches/{batch_id}", { params: { path: { batch_id: batchId } } }));
      const url = fresh.batch[field];
      if (!url) throw new Error("This file is no longer available.");
      window.location.assign(url);
    } catch (caught) {
      setError(caught);
    }
  }
  async function downloadResults() {
    try {
      const lines: string[] = [];
      let cursor: string | null | undefined = undefined;
      do {
        const query: { limit: number; cursor?: string } = cursor ? { limit: 1000, cursor } : { limit: 1000 };
        const page: Schemas["ResultsPage"] = await call(
          api.GET("/v1/batches/{batch_id}/results", { params: { path: { batch_id: batchId }, query } }),
        );
        for (const row of page.data) lines.push(JSON.stringify(row));
        cursor = page.next_cursor;
      } while (cursor);
      const url = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "application/jsonl" }));
      const link = document.createElement("a");
      link.href = url;
      link.download = `${batchId}-results.jsonl`;
      link.click();
      URL.revokeObjectURL(url);
    } catch (caught) {
      if (caught instanceof ApiError && caught.code === "result_too_large") {
        // A result no page can carry (over 6 MB): the whole results file holds it, signed anew.
        await openResultsFile();
        return;
      }
      setError(caught);
    }
  }
  async function openResultsFile() {
    try {
      const signed = await call(
        api.GET("/v1/batches/{batch_id}/artifact-url", { params: { path: { batch_id: batchId } } }),
      );
      window.location.assign(signed.url);
    } catch (caught) {
      setError(caught);
    }
  }

  if (read.loading) return <Loading what="batch" />;
  if (!batch) return <BatchUnavailable error={read.error} />;
  const counts = batch.counts;
  return (
    <>
      <p>
        <Link to="/batches">← Batches</Link>
      </p>
      <h1>
        Batch <code>{batch.id}</code>
      </h1>
      <ErrorLine error={read.error} />
      <dl className="facts">
        <dt>State</dt>
        <dd>
          <span className={`state state-${batch.state}`} data-testid="batch-state">
            {batch.state}
          </span>
        </dd>
        <dt>Created</dt>
        <dd data-testid="batch-created">{when(batch.created_at)}</dd>
        <dt>Deadline</dt>
        <dd>{when(batch.deadline_at)}</dd>
        <dt>Completed</dt>
        <dd>{when(batch.completed_at)}</dd>
        <dt>Routing</dt>
        <dd>
          {batch.routing_mode}, privacy {batch.privacy_tier}
        </dd>
        {batch.execution_summary.latest_error && (
          <>
            <dt>Latest error</dt>
            <dd>{batch.execution_summary.latest_error}</dd>
          </>
        )}
      </dl>
      <BatchProgress label="Batch progress" counts={counts} />
      <p data-testid="batch-counts">
        {counts.completed} completed · {counts.failed} failed · {counts.running} running · {counts.pending} pending ·{" "}
        {counts.canceled} canceled
      </p>
      {!active && !settled && (
        <p role="status" data-testid="settling">
          The batch is {batch.state}; work already dispatched is finishing. Its results, receipt and retry are
          ready once it settles; this page follows it.
        </p>
      )}
      <div className="actions">
        {active && (
          <button type="button" onClick={() => void cancel()}>
            Cancel batch
          </button>
        )}
        {settled && (counts.failed > 0 || counts.canceled > 0) && (
          <button type="button" onClick={() => void retry()}>
            Retry failed and canceled items
          </button>
        )}
        {settled && (
          <button type="button" onClick={() => void downloadResults()}>
            Download results (JSONL)
          </button>
        )}
        {FILES.map(
          ([field, label]) =>
            batch[field] && (
              <button key={field} type="button" onClick={() => void openFile(field)}>
                {label}
              </button>
            ),
        )}
      </div>
      <ErrorLine error={error} />
      {read.data?.billing_receipt ? <ReceiptView receipt={read.data.billing_receipt} /> : <p>The receipt is written when the batch settles.</p>}
      <Items
        batchId={batchId}
        refreshKey={`${batch.state}-${counts.completed}-${counts.failed}-${counts.canceled}-${batch.settled_at ?? ""}`}
      />
    </>
  );
}

/** A batch that could not be read (a 404 for an unknown or another org's id): say so, and the way back. */
function BatchUnavailable({ error }: { error: unknown }) {
  const missing = error instanceof ApiError && error.status === 404;
  return (
    <>
      <h1>{missing ? "Batch not found" : "The batch could not be loaded"}</h1>
      <ErrorLine error={error} />
      <p>
        <Link to="/batches">Back to batches</Link>
      </p>
    </>
  );
}

/** Of a lane's input, what the vendor read from / wrote to its prompt cache, at the lane's
 * locked prices for them (nothing when it reported none). */
function LaneCache({ lane }: { lane: Schemas["ProviderLaneReceipt"] }) {
  const text = cacheSplitText({
    cachedRead: lane.usage.cached_input_tokens,
    cacheWrite: lane.usage.cache_write_input_tokens,
    cachedReadPrice: lane.unit_prices.cached_input_per_mtok,
    cacheWritePrice: lane.unit_prices.cache_write_input_per_mtok,
  });
  return text ? <small className="lane-note" data-testid="lane-cache">of the input: {text}</small> : null;
}

/** The hosted tool calls the lane's vendor made and bills (web search), by tool, each at the
 * lane's locked price per 1,000 calls when it has one (docs/money.md); nothing when none. */
function LaneTools({ lane }: { lane: Schemas["ProviderLaneReceipt"] }) {
  const calls = Object.entries(lane.usage.tool_uses ?? {});
  if (!calls.length) return null;
  const prices = lane.unit_prices as Record<string, string | undefined>;
  const text = calls
    .map(([tool, count]) => {
      const price = prices[`${tool}_per_1k_calls`];
      return price ? `${tool} ${count} at ${price} USD per 1,000 calls` : `${tool} ${count} (not billed by the call)`;
    })
    .join(", ");
  return (
    <small className="lane-note" data-testid="lane-tools">
      hosted tool calls: {text}
    </small>
  );
}

function ReceiptView({ receipt }: { receipt: Receipt }) {
  const selected = receipt.provider_lanes ?? [];
  const rejected = receipt.rejected_lanes ?? [];
  const chart = selected.map((lane) => ({
    lane: `${lane.provider ?? "?"} / ${(lane.model ?? "?").split("/").pop()}`,
    completed: lane.item_counts.completed,
    failed: lane.item_counts.failed,
    canceled: lane.item_counts.canceled,
  }));
  const counted = new Map<string, number>();
  for (const lane of rejected) {
    const code = lane.rejection?.code ?? "unknown";
    counted.set(code, (counted.get(code) ?? 0) + 1);
  }
  const reasons = [...counted.entries()].map(([reason, lanes]) => ({ reason, lanes }));
  return (
    <section aria-labelledby="receipt-h">
      <h2 id="receipt-h">Routing receipt</h2>
      <dl className="facts">
        <dt>Settled price</dt>
        <dd data-testid="settled-price">{money(receipt.final_settled_price)}</dd>
        <dt>Provider subtotal</dt>
        <dd>{money(receipt.provider_subtotal)}</dd>
        <dt>Service fee</dt>
        <dd>
          {money(receipt.service_fee)}
          {receipt.service_fee_basis && <small data-testid="fee-basis">{receipt.service_fee_basis.schedule_line}</small>}
        </dd>
        <dt>Reserved / charged / released</dt>
        <dd>
          {money(receipt.credit_reserved)} / {money(receipt.credit_charged)} / {money(receipt.credit_released)}
        </dd>
        <dt>Settled</dt>
        <dd>{when(receipt.settled_at)}</dd>
      </dl>
      {receipt.savings && (
        <>
          <h3>What routing saved</h3>
          <SavingsFacts savings={receipt.savings} asOf={receipt.savings.prices_as_of} label="What routing saved" />
        </>
      )}
      <h3>Lanes that ran</h3>
      {selected.length === 0 && <Empty>No lane ran: no item was sent to a provider.</Empty>}
      <table hidden={selected.length === 0}>
        <thead>
          <tr>
            <th scope="col">Provider</th>
            <th scope="col">Model</th>
            <th scope="col">Items done / failed</th>
            <th scope="col">Tokens in / out</th>
            <th scope="col">Cost</th>
            <th scope="col">Failover from</th>
          </tr>
        </thead>
        <tbody>
          {selected.map((lane) => (
            <tr key={lane.lane_key}>
              <td>{lane.provider}</td>
              <td>{lane.model}</td>
              <td>
                {lane.item_counts.completed} / {lane.item_counts.failed}
              </td>
              <td>
                {lane.usage.prompt_tokens} / {lane.usage.completion_tokens}
                <LaneCache lane={lane} />
                <LaneTools lane={lane} />
              </td>
              <td>{money(lane.cost)}</td>
              <td>{lane.failover_from ?? "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {chart.length > 0 && (
        <figure aria-label="Items per lane">
          <ResponsiveContainer width="100%" height={Math.max(160, 60 * chart.length)}>
            <BarChart data={chart} layout="vertical" margin={{ left: 40 }}>
              <CartesianGrid strokeDasharray="3 3" />
              <XAxis type="number" allowDecimals={false} />
              <YAxis type="category" dataKey="lane" width={220} />
              <Tooltip cursor={{ fill: "rgba(0, 0, 0, 0.05)" }} />
              <Legend />
              <Bar dataKey="completed" stackId="items" fill="#2e7d32" isAnimationActive={false} />
              <Bar dataKey="failed" stackId="items" fill="#c62828" isAnimationActive={false} />
              <Bar dataKey="canceled" stackId="items" fill="#757575" isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
          <figcaption>Items per lane that ran</figcaption>
        </figure>
      )}
      {(receipt.rescues ?? []).length > 0 && <RescuesTable rescues={receipt.rescues ?? []} />}
      <h3>Lanes not chosen, and why</h3>
      {reasons.length > 0 && (
        <figure aria-label="Lanes not chosen, by reason">
          <ResponsiveContainer width="100%" height={Math.max(120, 44 * reasons.length)}>
            <BarChart data={reasons} layout="vertical" margin={{ left: 40 }}>
              <CartesianGrid strokeDasharray="3 3" />
              <XAxis type="number" allowDecimals={false} />
              <YAxis type="category" dataKey="reason" width={220} />
              <Tooltip cursor={{ fill: "rgba(0, 0, 0, 0.05)" }} />
              <Bar dataKey="lanes" fill="#ef6c00" isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
          <figcaption>Lanes not chosen, counted by rejection code</figcaption>
        </figure>
      )}
      {rejected.length === 0 ? (
        <p>No other lane was considered.</p>
      ) : (
        <table data-testid="rejected-lanes">
          <thead>
            <tr>
              <th scope="col">Provider</th>
              <th scope="col">Model</th>
              <th scope="col">Reason</th>
              <th scope="col">Explanation</th>
            </tr>
          </thead>
          <tbody>
            {rejected.map((lane, index) => (
              <tr key={`${lane.lane_id ?? index}`}>
                <td>{lane.provider}</td>
                <td>{lane.model}</td>
                <td>
                  <code>{lane.rejection?.code ?? "—"}</code>
                </td>
                <td>{lane.rejection?.message ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

const RESCUE_REASONS: Record<Schemas["RescuedLaneReceipt"]["reason"], string> = {
  deadline_rescue: "deadline rescue: took the items of a lane projected to miss the deadline",
  deadline_rescue_rest: "deadline rescue, rest: the items the rescue's money left on the old lane",
};

/** The receipt's `rescues` (docs/batches.md, "Deadline rescue"): per rescue lane and rest
 * record, the lane it took over from, why, its items, its cost against the quoted prices and,
 * under allow_overage, the overage hold its rescue took and what was charged of it. */
function RescuesTable({ rescues }: { rescues: Schemas["RescuedLaneReceipt"][] }) {
  return (
    <>
      <h3>Deadline rescue</h3>
      <table data-testid="rescues">
        <thead>
          <tr>
            <th scope="col">Lane</th>
            <th scope="col">Took items from</th>
            <th scope="col">Reason</th>
            <th scope="col">Items done / failed / canceled</th>
            <th scope="col">Cost</th>
            <th scope="col">At quoted prices</th>
            <th scope="col">Difference</th>
            <th scope="col">Overage charged / held</th>
          </tr>
        </thead>
        <tbody>
          {rescues.map((lane) => (
            <tr key={lane.lane_key}>
              <td>
                {lane.provider} <small>{lane.lane_key}</small>
              </td>
              <td>{lane.from_lane_key ?? "—"}</td>
              <td>
                <code>{lane.reason}</code> <small>{RESCUE_REASONS[lane.reason]}</small>
              </td>
              <td>
                {lane.item_counts.completed} / {lane.item_counts.failed} / {lane.item_counts.canceled}
              </td>
              <td data-testid="rescue-cost">{money(lane.cost)}</td>
              <td>{money(lane.cost_at_quoted_prices)}</td>
              <td data-testid="rescue-difference">{money(lane.cost_difference)}</td>
              <td data-testid="rescue-overage">
                {lane.overage_held ? `${money(lane.overage_charged)} / ${money(lane.overage_held)}` : "—"}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

const ITEM_STATUSES = ["", "pending", "processing", "completed", "failed"] as const;
type ItemStatus = (typeof ITEM_STATUSES)[number];

/** The batch's items, 100 at a time with "Load more items" while the API has a next page; a
 * change of the filter starts over, a change of the batch's counts reads the shown pages again. */
function Items({ batchId, refreshKey }: { batchId: string; refreshKey: string }) {
  const [status, setStatus] = useState<ItemStatus>("");
  const items = usePaged(
    (cursor) =>
      call(
        api.GET("/v1/batches/{batch_id}/items", {
          params: {
            path: { batch_id: batchId },
            query: { limit: 100, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) },
          },
        }),
      ),
    [batchId, status],
  );
  const readFor = useRef(refreshKey);
  useEffect(() => {
    if (readFor.current === refreshKey) return;
    readFor.current = refreshKey;
    void items.reload();
  }, [refreshKey, items.reload]);
  return (
    <section aria-labelledby="items-h">
      <h2 id="items-h">Items</h2>
      <Field id="item-status" label="Item status">
        <select id="item-status" value={status} onChange={(e) => setStatus(e.target.value as ItemStatus)}>
          {ITEM_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s || "all"}
            </option>
          ))}
        </select>
      </Field>
      <ErrorLine error={items.error} />
      {items.data && items.data.data.length === 0 && <Empty>{status ? `No ${status} items.` : "No items."}</Empty>}
      {items.data && items.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Item</th>
              <th scope="col">Model</th>
              <th scope="col">Status</th>
              <th scope="col">Result preview</th>
            </tr>
          </thead>
          <tbody>
            {items.data.data.map((item) => (
              <tr key={item.sequence_number}>
                <td>{item.sequence_number}</td>
                <td>{item.customer_item_id}</td>
                <td>{item.model}</td>
                <td>{item.status}</td>
                <td className="wrap">{item.error ? `${item.error.code}: ${item.error.message}` : (item.output_preview ?? "—")}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <LoadMore what="items" more={items.more} />
    </section>
  );
}
