// Overview: balance, reserved, this period's spend against the limit and what routing saved, recent batches, alerts.
// While a recent batch runs, the wallet and the batches are read again (reservations settle).
import { useEffect } from "react";
import { Link } from "react-router-dom";
import { api, call } from "../api/client";
import { isSettled, money, when } from "../format";
import { BatchProgress, Empty, ErrorLine, Loading, POLL_MS, ProgressBar, useLoad } from "../components/ui";
import { SavingsFacts } from "../components/Savings";

export function Overview() {
  const usage = useLoad(() => call(api.GET("/v1/usage")));
  const controls = useLoad(() => call(api.GET("/v1/billing/controls")));
  const batches = useLoad(() => call(api.GET("/v1/batches", { params: { query: { limit: 5 } } })));
  const events = useLoad(() => call(api.GET("/v1/billing/events", { params: { query: { limit: 5 } } })));
  const active = batches.data?.data.some((b) => !isSettled(b)) ?? false;
  useEffect(() => {
    if (!active) return;
    const timer = window.setInterval(() => {
      void batches.reload();
      void usage.reload();
    }, POLL_MS);
    return () => window.clearInterval(timer);
  }, [active, batches.reload, usage.reload]);
  const limit = controls.data?.controls;
  const spent = usage.data?.current_period.spend;
  return (
    <>
      <h1>Overview</h1>
      <section aria-labelledby="wallet-h" className="cards">
        <h2 id="wallet-h" className="sr-only">
          Wallet
        </h2>
        <ErrorLine error={usage.error} />
        {usage.loading && <Loading what="wallet" />}
        {usage.data && (
          <>
            <div className="card">
              <span>Available</span>
              <strong data-testid="available">{money(usage.data.available)}</strong>
            </div>
            <div className="card">
              <span>Balance</span>
              <strong>{money(usage.data.balance)}</strong>
            </div>
            <div className="card">
              <span>Reserved for running batches</span>
              <strong>{money(usage.data.reserved)}</strong>
            </div>
            <div className="card">
              <span>
                Spend this period ({usage.data.current_period.start_date} – {usage.data.current_period.end_date})
              </span>
              <strong>{money(spent)}</strong>
              {limit?.limit_enabled && limit.limit_amount ? (
                <ProgressBar
                  label="Spend against the limit"
                  done={Number(spent?.amount ?? 0)}
                  total={Number(limit.limit_amount.amount)}
                  text={`${money(spent)} of ${money(limit.limit_amount)}`}
                />
              ) : (
                <small>
                  No spending limit. <Link to="/billing">Set one</Link>
                </small>
              )}
              {limit?.limit_enabled && (
                <small>
                  {limit.limit_mode} limit of {money(limit.limit_amount)} per {limit.limit_period === "daily" ? "day" : "month"}
                </small>
              )}
            </div>
            <div className="card">
              <span>Saved by routing this period</span>
              <strong data-testid="period-saved">{money(usage.data.current_period.savings.saved_vs_list_price)}</strong>
              <SavingsFacts
                savings={usage.data.current_period.savings}
                asOf={usage.data.reference_prices_as_of}
                label="What routing saved this period"
              />
            </div>
          </>
        )}
        <ErrorLine error={controls.error} />
      </section>
      <section aria-labelledby="recent-h">
        <h2 id="recent-h">Recent batches</h2>
        <ErrorLine error={batches.error} />
        {batches.data && batches.data.data.length === 0 && (
          <Empty>
            No batches yet. <Link to="/quotes">Quote your first batch</Link>.
          </Empty>
        )}
        {batches.data && batches.data.data.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Batch</th>
                <th scope="col">State</th>
                <th scope="col">Progress</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {batches.data.data.map((batch) => (
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
                  <td>{when(batch.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section aria-labelledby="alerts-h">
        <h2 id="alerts-h">Recent alerts</h2>
        <ErrorLine error={events.error} />
        {events.data && events.data.data.length === 0 && <Empty>No alerts yet.</Empty>}
        {events.data && events.data.data.length > 0 && (
          <ul className="plain">
            {events.data.data.map((event) => (
              <li key={event.id}>
                <strong>{event.type}</strong> · {when(event.created_at)}
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  );
}
