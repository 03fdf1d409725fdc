// Schedules: the org's recurring schedules (docs/schedules.md), 50 at a time with "Load more
// schedules"; each paused or resumed in place (the row shows what the API answered) or deleted
// after a confirmation. A schedule's page: its definition, the lanes its golden set excluded,
// and its runs, newest first, each with the batch it made or why it made none.
// They are created with the API, the Python client or `batchroute schedules create`.
import { useState } from "react";
import { Link, useParams } from "react-router-dom";
import { api, call, type Schemas } from "../api/client";
import { when } from "../format";
import { Empty, ErrorLine, LoadMore, Loading, useLoad, usePaged } from "../components/ui";

type Schedule = Schemas["ScheduleOut"];
const PAGE = 50;

function inputOf(schedule: Schedule): string {
  const source = schedule.input_source as { type?: string; file_id?: string; target_id?: string; prefix?: string };
  return source.type === "file" ? `file ${source.file_id}` : `bucket ${source.target_id}/${source.prefix ?? ""}`;
}

export function Schedules() {
  const list = usePaged(
    (cursor) => call(api.GET("/v1/schedules", { params: { query: { limit: PAGE, ...(cursor ? { cursor } : {}) } } })),
    [],
  );
  const [error, setError] = useState<unknown>(null);
  // The schedules changed here, by id: the row shows the API's answer until the list is read again.
  const [changed, setChanged] = useState<Record<string, Schedule>>({});
  const [busy, setBusy] = useState<string | null>(null);

  async function toggle(schedule: Schedule) {
    const action = schedule.state === "active" ? "pause" : "resume";
    setBusy(schedule.id);
    try {
      const path = action === "pause" ? "/v1/schedules/{schedule_id}/pause" : "/v1/schedules/{schedule_id}/resume";
      const after = await call(api.POST(path, { params: { path: { schedule_id: schedule.id } } }));
      setChanged((current) => ({ ...current, [schedule.id]: after }));
      setError(null);
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(null);
    }
  }

  async function remove(schedule: Schedule) {
    if (!window.confirm(`Delete the schedule "${schedule.name}" and its history? The batches it made stay.`)) return;
    setBusy(schedule.id);
    try {
      await call(api.DELETE("/v1/schedules/{schedule_id}", { params: { path: { schedule_id: schedule.id } } }));
      setError(null);
      await list.reload();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(null);
    }
  }

  return (
    <>
      <h1>Schedules</h1>
      <p className="muted">
        Each fire time of a schedule creates a batch. Create schedules with the API (<code>POST /v1/schedules</code>),
        the Python client or <code>batchroute schedules create</code>.
      </p>
      <ErrorLine error={error} />
      <ErrorLine error={list.error} />
      {list.loading && <Loading what="schedules" />}
      {list.data && list.data.data.length === 0 && <Empty>No schedules yet.</Empty>}
      {list.data && list.data.data.length > 0 && (
        <table>
          <caption>Schedules of this organization</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">State</th>
              <th scope="col">When</th>
              <th scope="col">Next fire</th>
              <th scope="col">Last fire</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.data.data.map((listed) => {
              const schedule = changed[listed.id] ?? listed;
              return (
                <tr key={schedule.id}>
                  <td>
                    <Link to={`/schedules/${schedule.id}`}>{schedule.name}</Link>
                  </td>
                  <td>
                    <span className={`state state-${schedule.state}`}>{schedule.state}</span>
                  </td>
                  <td>
                    <code>{schedule.expression}</code> ({schedule.time_zone})
                  </td>
                  <td>{schedule.next_fire_at ? when(schedule.next_fire_at) : "—"}</td>
                  <td>{schedule.last_fire_at ? when(schedule.last_fire_at) : "—"}</td>
                  <td>
                    <button
                      type="button"
                      disabled={busy === schedule.id}
                      onClick={() => void toggle(schedule)}
                      aria-label={`${schedule.state === "active" ? "Pause" : "Resume"} ${schedule.name}`}
                    >
                      {schedule.state === "active" ? "Pause" : "Resume"}
                    </button>{" "}
                    <button
                      type="button"
                      disabled={busy === schedule.id}
                      onClick={() => void remove(schedule)}
                      aria-label={`Delete ${schedule.name}`}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <LoadMore what="schedules" more={list.more} />
    </>
  );
}

export function ScheduleRuns() {
  const { scheduleId = "" } = useParams();
  const schedule = useLoad(
    () => call(api.GET("/v1/schedules/{schedule_id}", { params: { path: { schedule_id: scheduleId } } })),
    [scheduleId],
  );
  const runs = usePaged(
    (cursor) =>
      call(
        api.GET("/v1/schedules/{schedule_id}/runs", {
          params: { path: { schedule_id: scheduleId }, query: { limit: PAGE, ...(cursor ? { cursor } : {}) } },
        }),
      ),
    [scheduleId],
  );
  const shown = schedule.data;
  return (
    <>
      <p>
        <Link to="/schedules">All schedules</Link>
      </p>
      <h1>{shown ? `Schedule ${shown.name}` : "Schedule"}</h1>
      <ErrorLine error={schedule.error} />
      {schedule.loading && <Loading what="the schedule" />}
      {shown && (
        <dl className="facts">
          <dt>State</dt>
          <dd>
            <span className={`state state-${shown.state}`}>{shown.state}</span>
          </dd>
          <dt>When</dt>
          <dd>
            <code>{shown.expression}</code> ({shown.time_zone})
          </dd>
          <dt>Next fire</dt>
          <dd>{shown.next_fire_at ? when(shown.next_fire_at) : "— (paused)"}</dd>
          <dt>Input</dt>
          <dd>{inputOf(shown)}</dd>
          <dt>Version</dt>
          <dd>{shown.version}</dd>
          <dt>Excluded lanes</dt>
          <dd>
            {shown.excluded_lanes.length === 0
              ? "none"
              : shown.excluded_lanes.map((lane) => `${lane.lane_id} (score ${lane.score})`).join(", ")}
          </dd>
        </dl>
      )}
      <h2>Runs</h2>
      <ErrorLine error={runs.error} />
      {runs.loading && <Loading what="runs" />}
      {runs.data && runs.data.data.length === 0 && <Empty>No runs yet: it has not fired.</Empty>}
      {runs.data && runs.data.data.length > 0 && (
        <table>
          <caption>Runs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Fire time</th>
              <th scope="col">State</th>
              <th scope="col">Batch or error</th>
              <th scope="col">Trigger</th>
            </tr>
          </thead>
          <tbody>
            {runs.data.data.map((run) => (
              <tr key={run.fire_at}>
                <td>{when(run.fire_at)}</td>
                <td>
                  <span className={`state state-${run.state}`}>{run.state}</span>
                </td>
                <td>
                  {run.batch_id ? (
                    <Link to={`/batches/${run.batch_id}`}>{run.batch_id}</Link>
                  ) : run.error ? (
                    `${run.error.code}: ${run.error.message}`
                  ) : (
                    "—"
                  )}
                </td>
                <td>{run.trigger}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <LoadMore what="runs" more={runs.more} />
    </>
  );
}
