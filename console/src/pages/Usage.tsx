// Usage: spend per day, stacked by model or by provider (GET /v1/usage), drawn with recharts.
import { useState } from "react";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { api, call, type Schemas } from "../api/client";
import { money } from "../format";
import { ErrorLine, Field, Loading, useLoad } from "../components/ui";

const COLORS = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#4e342e", "#546e7a"];

type Period = Schemas["UsagePeriodOut"];

// `by_day` carries each day's totals and `by_model` / `by_provider` the period's split; the API
// does not (yet) split a day by model, so the console draws the two it has instead of guessing.
function perDay(period: Period) {
  return period.by_day.map((day) => ({ date: day.date, spend: Number(day.spend.amount) }));
}

function perKey(period: Period, by: "model" | "provider") {
  return by === "model"
    ? period.by_model.map((m) => ({ key: m.model, spend: Number(m.spend.amount) }))
    : period.by_provider.map((p) => ({ key: p.provider, spend: Number(p.spend.amount) }));
}

export function Usage() {
  const [period, setPeriod] = useState<"daily" | "monthly">("monthly");
  const [by, setBy] = useState<"model" | "provider">("model");
  const usage = useLoad(() => call(api.GET("/v1/usage", { params: { query: { period } } })), [period]);
  const current = usage.data?.current_period;

  return (
    <>
      <h1>Usage</h1>
      <div className="row">
        <Field id="usage-period" label="Period">
          <select id="usage-period" value={period} onChange={(e) => setPeriod(e.target.value as "daily" | "monthly")}>
            <option value="monthly">this month</option>
            <option value="daily">today</option>
          </select>
        </Field>
        <Field id="usage-by" label="Stack by">
          <select id="usage-by" value={by} onChange={(e) => setBy(e.target.value as "model" | "provider")}>
            <option value="model">model</option>
            <option value="provider">provider</option>
          </select>
        </Field>
      </div>
      <ErrorLine error={usage.error} />
      {usage.loading && <Loading what="usage" />}
      {current && (
        <>
          <p>
            {current.start_date} – {current.end_date}: <strong>{money(current.spend)}</strong>, {current.requests.total} requests,{" "}
            {current.tokens.total} tokens (previous period {money(usage.data?.previous_period.spend)}).
          </p>
          <div className="charts">
            <figure aria-label="Spend per day">
              <ResponsiveContainer width="100%" height={280}>
                <BarChart data={perDay(current)}>
                  <CartesianGrid strokeDasharray="3 3" />
                  <XAxis dataKey="date" />
                  <YAxis />
                  <Tooltip />
                  <Bar dataKey="spend" name="spend (USD)" fill={COLORS[0]} />
                </BarChart>
              </ResponsiveContainer>
              <figcaption>Spend per day (USD)</figcaption>
            </figure>
            <figure aria-label={`Spend by ${by}`}>
              <ResponsiveContainer width="100%" height={280}>
                <BarChart data={perKey(current, by)} layout="vertical" margin={{ left: 30 }}>
                  <CartesianGrid strokeDasharray="3 3" />
                  <XAxis type="number" />
                  <YAxis type="category" dataKey="key" width={200} />
                  <Tooltip />
                  <Legend />
                  <Bar dataKey="spend" name="spend (USD)" fill={COLORS[1]} />
                </BarChart>
              </ResponsiveContainer>
              <figcaption>Spend this period by {by} (USD)</figcaption>
            </figure>
          </div>
          <table>
            <caption>By {by}</caption>
            <thead>
              <tr>
                <th scope="col">{by}</th>
                <th scope="col">Spend</th>
                <th scope="col">Requests</th>
                <th scope="col">Tokens</th>
              </tr>
            </thead>
            <tbody>
              {(by === "model" ? current.by_model.map((m) => ({ ...m, key: m.model })) : current.by_provider.map((p) => ({ ...p, key: p.provider }))).map((row) => (
                <tr key={row.key}>
                  <td>{row.key}</td>
                  <td>{money(row.spend)}</td>
                  <td>{row.requests.total}</td>
                  <td>{row.tokens.total}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
