// Batches: the list with a state filter and live progress (polled while any is not settled:
// a canceled batch's counts still move while its dispatched work ends), 50 at a time with
// "Load more batches" while the API has a next page.
import { useEffect } from "react";
import { Link, useSearchParams } from "react-router-dom";
import { api, call } from "../api/client";
import { isSettled, when } from "../format";
import { BatchProgress, Empty, ErrorLine, Field, LoadMore, Loading, POLL_MS, usePaged } from "../components/ui";

const FILTERS = ["", "active", "completed", "failed", "canceled", "expired"];
const PAGE = 50;

export function Batches() {
  const [params, setParams] = useSearchParams();
  const state = params.get("state") ?? "";
  const list = usePaged(
    (cursor) =>
      call(
        api.GET("/v1/batches", {
          params: { query: { limit: PAGE, ...(state ? { state } : {}), ...(cursor ? { cursor } : {}) } },
        }),
      ),
    [state],
  );
  const following = list.data?.data.some((b) => !isSettled(b)) ?? false;
  useEffect(() => {
    if (!following) return;
    const timer = window.setInterval(() => void list.reload(), POLL_MS);
    return () => window.clearInterval(timer);
  }, [following, list.reload]);
  return (
    <>
      <h1>Batches</h1>
      <p>
        <Link to="/quotes">New batch from a JSONL file</Link>
      </p>
      <Field id="state-filter" label="Show">
        <select id="state-filter" value={state} onChange={(e) => setParams(e.target.value ? { state: e.target.value } : {})}>
          {FILTERS.map((f) => (
            <option key={f} value={f}>
              {f || "all"}
            </option>
          ))}
        </select>
      </Field>
      <ErrorLine error={list.error} />
      {list.loading && <Loading what="batches" />}
      {list.data && list.data.data.length === 0 && (
        <Empty>
          {state ? (
            `No batches in state ${state}.`
          ) : (
            <>
              No batches yet. <Link to="/quotes">Quote your first batch</Link>.
            </>
          )}
        </Empty>
      )}
      {list.data && list.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Batch</th>
              <th scope="col">State</th>
              <th scope="col">Progress</th>
              <th scope="col">Failed</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {list.data.data.map((batch) => (
              <tr key={batch.id}>
                <td>
                  <Link to={`/batches/${batch.id}`}>{batch.id}</Link>
                </td>
                <td>
                  <span className={`state state-${batch.state}`}>{batch.state}</span>
                </td>
                <td>
                  <BatchProgress label={`Progress of ${batch.id}`} counts={batch.counts} />
                </td>
                <td>{batch.counts.failed}</td>
                <td>{when(batch.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list.data && !state && list.data.data.length > 0 && (
        <p className="muted" data-testid="batches-shown">
          Showing {list.data.data.length} of {list.data.workspace_total_count} batches.
        </p>
      )}
      <LoadMore what="batches" more={list.more} />
      {following && <p className="muted">Refreshing every {POLL_MS / 1000} s while batches are active or settling.</p>}
    </>
  );
}
