// Usage: spend per day, stacked by model or by provider (GET /v1/usage), drawn with recharts.
import { useState } from "react";
import { Link } from "react-router-dom";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { api, call, type Schemas } from "../api/client";
import { amountText, cacheSplitText, money, spendAxis } from "../format";
import { Empty, ErrorLine, Field, Loading, useLoad } from "../components/ui";

const COLORS = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#4e342e", "#546e7a"];

type Period = Schemas["UsagePeriodOut"];

/** One row per day, one stacked series per model (or provider): `by_day[].by_model` / `by_provider`. */
function stacked(period: Period, by: "model" | "provider") {
  const keys = (by === "model" ? period.by_model.map((m) => m.model) : period.by_provider.map((p) => p.provider));
  const data = period.by_day.map((day) => {
    const row: Record<string, number | string> = { date: day.date };
    const parts = by === "model" ? day.by_model.map((m) => [m.model, m.spend] as const) : day.by_provider.map((p) => [p.provider, p.spend] as const);
    for (const [key, spend] of parts) row[key] = Number(spend.amount);
    return row;
  });
  const tallest = Math.max(0, ...data.map((row) => keys.reduce((sum, key) => sum + Number(row[key] ?? 0), 0)));
  return { keys, data, axis: spendAxis(tallest) };
}

/** Of the input tokens, those read from / written to the vendors' prompt caches (when any). */
function TokensCache({ tokens }: { tokens: Schemas["UsageTokens"] }) {
  const text = cacheSplitText({ cachedRead: tokens.cached_input, cacheWrite: tokens.cache_write_input });
  return text ? <small data-testid="tokens-cache"> (of the input: {text})</small> : null;
}

export function Usage() {
  const [period, setPeriod] = useState<"daily" | "monthly">("monthly");
  const [by, setBy] = useState<"model" | "provider">("model");
  const usage = useLoad(() => call(api.GET("/v1/usage", { params: { query: { period } } })), [period]);
  const current = usage.data?.current_period;
  const chart = current ? stacked(current, by) : null;

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
      {current && chart && (
        <p>
          {current.start_date} – {current.end_date}: <strong>{money(current.spend)}</strong>, {current.requests.total} requests,{" "}
          {current.tokens.total} tokens
          <TokensCache tokens={current.tokens} /> (previous period {money(usage.data?.previous_period.spend)}).
        </p>
      )}
      {chart && chart.keys.length === 0 && (
        <Empty>
          No usage yet this period. <Link to="/quotes">Quote a batch</Link> to see spend per day here.
        </Empty>
      )}
      {current && chart && chart.keys.length > 0 && (
        <>
          <figure aria-label={`Spend per day by ${by}`}>
            <ResponsiveContainer width="100%" height={320}>
              <BarChart data={chart.data}>
                <CartesianGrid strokeDasharray="3 3" />
                <XAxis dataKey="date" />
                <YAxis ticks={chart.axis.ticks} domain={[0, chart.axis.top]} tickFormatter={chart.axis.label} />
                <Tooltip cursor={{ fill: "rgba(0, 0, 0, 0.05)" }} formatter={(value) => `${amountText(String(value))} USD`} />
                <Legend />
                {chart.keys.map((key, index) => (
                  <Bar key={key} dataKey={(row: Record<string, number | string>) => row[key] ?? 0} name={key} stackId="spend" fill={COLORS[index % COLORS.length]} isAnimationActive={false} />
                ))}
              </BarChart>
            </ResponsiveContainer>
            <figcaption>Spend per day (USD), stacked by {by}</figcaption>
          </figure>
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
                  <td>
                    {row.tokens.total}
                    <TokensCache tokens={row.tokens} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
