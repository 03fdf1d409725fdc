// Billing: buy credits (hosted checkout), spending limit and alerts, auto top-up, audit log.
// Validation is the server's: its `details.field` puts the message under the right control.
import { useEffect, useState, type FormEvent } from "react";
import { useSearchParams } from "react-router-dom";
import { ApiError, api, call, type Schemas } from "../api/client";
import { money, plainDecimalProblem, when } from "../format";
import { ErrorLine, Field, LoadMore, Loading, Notice, useLoad, usePaged, type More } from "../components/ui";

/** The server's message for `field` (or one of its entries, e.g. `alert_thresholds[0].value`). */
function fieldError(error: unknown, field: string): string | undefined {
  if (error instanceof ApiError && error.field && (error.field === field || error.field.startsWith(`${field}[`) || error.field.startsWith(`${field}.`))) {
    return `${error.code}: ${error.message}`;
  }
  return undefined;
}

/** Money typed as text is checked before it is sent (the server refuses it the same way,
 * docs/money.md): the first field that is not a plain decimal, as the error the server would
 * answer (the form's `code`), shown under that field. */
function notPlain(code: string, fields: [string, string | null][], decimals: number): ApiError | null {
  for (const [field, text] of fields) {
    const problem = text === null ? undefined : plainDecimalProblem(text, decimals);
    if (problem) return new ApiError(400, code, problem, { field });
  }
  return null;
}

const PLAIN = "A plain decimal, like 1000 or 12.50";

/** A percent threshold's value as the API takes it: a number, or the text itself when it is
 * blank, which the API refuses under the field (Number("") would send 0, a 0% threshold). */
function percent(text: string): number | string {
  return text.trim() === "" ? text : Number(text);
}

/** An error that no field shows is shown above the form's button instead. */
function unplaced(error: unknown, fields: string[]): unknown {
  if (error instanceof ApiError && error.field && fields.some((f) => fieldError(error, f))) return null;
  return error;
}

type AuditPage = Schemas["AuditList"];

// The audit log, 20 changes a page: "Load more changes" reads the older ones by the page's cursor.
const AUDIT_PAGE = 20;

export function Billing() {
  // The audit log is read here so that a save shows in it at once, without a reload.
  const audit = usePaged((cursor) =>
    call(api.GET("/v1/billing/controls/audit", { params: { query: { limit: AUDIT_PAGE, ...(cursor ? { cursor } : {}) } } })),
  );
  return (
    <>
      <h1>Billing</h1>
      <BuyCredits />
      <SpendingControls onSaved={() => void audit.reload()} />
      <AutoTopup />
      <AuditLog data={audit.data} error={audit.error} more={audit.more} />
    </>
  );
}

const CHECKOUT_POLL_MS = 1500;
const CHECKOUT_POLL_FOR_MS = 30000;

function BuyCredits() {
  const [params] = useSearchParams();
  const [amount, setAmount] = useState("25");
  const [error, setError] = useState<unknown>(null);
  const [credited, setCredited] = useState<Schemas["CheckoutStateOut"] | null>(null);
  const usage = useLoad(() => call(api.GET("/v1/usage")));
  const outcome = params.get("checkout");
  const sessionId = params.get("session_id");
  // The wallet is credited by the processor's webhook, moments after the redirect back: ask
  // whether this checkout is credited until it is, then show the credit and the new balance.
  useEffect(() => {
    if (outcome !== "success" || !sessionId || credited) return;
    async function look() {
      try {
        const state = await call(api.GET("/v1/billing/checkout/{session_id}", { params: { path: { session_id: sessionId! } } }));
        if (state.status === "credited") {
          setCredited(state);
          void usage.reload();
        }
      } catch {
        // not known yet, or a network blip: look again on the next tick
      }
    }
    void look();
    const timer = window.setInterval(() => void look(), CHECKOUT_POLL_MS);
    const stop = window.setTimeout(() => window.clearInterval(timer), CHECKOUT_POLL_FOR_MS);
    return () => {
      window.clearInterval(timer);
      window.clearTimeout(stop);
    };
  }, [outcome, sessionId, credited, usage.reload]);
  async function submit(event: FormEvent) {
    event.preventDefault();
    const refused = notPlain("invalid_amount", [["amount", amount]], 2);
    if (refused) return setError(refused);
    try {
      const checkout = await call(api.POST("/v1/billing/checkout", { body: { amount } }));
      window.location.assign(checkout.checkout_url);
    } catch (caught) {
      setError(caught);
    }
  }
  return (
    <section aria-labelledby="buy-h">
      <h2 id="buy-h">Buy credits</h2>
      {usage.data && (
        <p>
          Available: <strong data-testid="billing-available">{money(usage.data.available)}</strong> (balance{" "}
          {money(usage.data.balance)}, reserved {money(usage.data.reserved)})
        </p>
      )}
      <ErrorLine error={usage.error} />
      {outcome === "success" && !credited && (
        <Notice>Payment received. Credits appear as soon as the processor confirms it.</Notice>
      )}
      {credited && <Notice>{money(credited.amount)} of credits added.</Notice>}
      {outcome === "canceled" && <Notice>Checkout canceled; nothing was charged.</Notice>}
      <form className="inline" onSubmit={(e) => void submit(e)}>
        <Field id="buy-amount" label="Amount (USD, 5 to 10,000)" hint={PLAIN} error={fieldError(error, "amount")}>
          <input id="buy-amount" inputMode="decimal" required value={amount} onChange={(e) => setAmount(e.target.value)} />
        </Field>
        <button type="submit">Continue to payment</button>
      </form>
      <ErrorLine error={unplaced(error, ["amount"])} />
    </section>
  );
}

interface ThresholdDraft {
  type: string;
  value: string;
}

const CONTROL_FIELDS = ["limit_enabled", "limit_period", "limit_amount", "limit_mode", "limit_timezone", "low_balance_amount", "alert_thresholds"];

function SpendingControls({ onSaved }: { onSaved: () => void }) {
  const loaded = useLoad(() => call(api.GET("/v1/billing/controls")));
  const [enabled, setEnabled] = useState(false);
  const [period, setPeriod] = useState("monthly");
  const [amount, setAmount] = useState("");
  const [mode, setMode] = useState("soft");
  const [timezone, setTimezone] = useState("UTC");
  const [lowBalance, setLowBalance] = useState("");
  const [emailAlerts, setEmailAlerts] = useState(true);
  const [webhookAlerts, setWebhookAlerts] = useState(false);
  const [thresholds, setThresholds] = useState<ThresholdDraft[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);

  useEffect(() => {
    const c = loaded.data?.controls;
    if (!c) return;
    setEnabled(c.limit_enabled);
    setPeriod(c.limit_period ?? "monthly");
    setAmount(c.limit_amount?.amount ?? "");
    setMode(c.limit_mode);
    setTimezone(c.limit_timezone);
    setLowBalance(c.low_balance_amount?.amount ?? "");
    setEmailAlerts(c.alert_email_enabled);
    setWebhookAlerts(c.alert_webhook_enabled);
    setThresholds(
      c.alert_thresholds.map((t) => ({ type: t.type, value: typeof t.value === "number" ? String(t.value) : t.value.amount })),
    );
  }, [loaded.data]);

  async function save(event: FormEvent) {
    event.preventDefault();
    setSaved(false);
    const refused = notPlain(
      "invalid_controls",
      [
        ["limit_amount", enabled ? amount : null],
        ["low_balance_amount", lowBalance.trim() === "" ? null : lowBalance],
        ...thresholds.map((t, i): [string, string | null] => [`alert_thresholds[${i}].value`, t.type === "pct_of_limit" ? null : t.value]),
      ],
      6,
    );
    if (refused) return setError(refused);
    const body = {
      limit_enabled: enabled,
      limit_period: enabled ? period : null,
      limit_amount: enabled ? amount : null,
      limit_mode: mode,
      limit_timezone: timezone,
      low_balance_amount: lowBalance.trim() === "" ? null : lowBalance,
      alert_email_enabled: emailAlerts,
      alert_webhook_enabled: webhookAlerts,
      alert_thresholds: thresholds.map((t) => ({ type: t.type, value: t.type === "pct_of_limit" ? percent(t.value) : t.value })),
    } as unknown as Schemas["ControlsUpdate"];
    try {
      loaded.setData(await call(api.PUT("/v1/billing/controls", { body })));
      setError(null);
      setSaved(true);
      onSaved();
    } catch (caught) {
      setError(caught);
    }
  }

  if (loaded.loading) return <Loading what="spending controls" />;
  return (
    <section aria-labelledby="limit-h">
      <h2 id="limit-h">Spending limit and alerts</h2>
      <ErrorLine error={loaded.error} />
      <form onSubmit={(e) => void save(e)}>
        <div className="field check">
          <input id="limit-enabled" type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
          <label htmlFor="limit-enabled">Limit spending</label>
        </div>
        <div className="row">
          <Field id="limit-amount" label="Limit (USD)" hint={PLAIN} error={fieldError(error, "limit_amount")}>
            <input id="limit-amount" inputMode="decimal" value={amount} onChange={(e) => setAmount(e.target.value)} disabled={!enabled} />
          </Field>
          <Field id="limit-period" label="Per" error={fieldError(error, "limit_period")}>
            <select id="limit-period" value={period} onChange={(e) => setPeriod(e.target.value)} disabled={!enabled}>
              <option value="daily">day</option>
              <option value="monthly">month</option>
            </select>
          </Field>
          <Field id="limit-mode" label="When reached" error={fieldError(error, "limit_mode")}>
            <select id="limit-mode" value={mode} onChange={(e) => setMode(e.target.value)}>
              <option value="soft">soft: alert only</option>
              <option value="hard">hard: refuse new work</option>
            </select>
          </Field>
          <Field id="limit-timezone" label="Time zone of the period" error={fieldError(error, "limit_timezone")}>
            <input id="limit-timezone" value={timezone} onChange={(e) => setTimezone(e.target.value)} />
          </Field>
        </div>
        <Field id="low-balance" label="Low-balance alert below (USD, empty for none)" hint={PLAIN} error={fieldError(error, "low_balance_amount")}>
          <input id="low-balance" inputMode="decimal" value={lowBalance} onChange={(e) => setLowBalance(e.target.value)} />
        </Field>
        <fieldset>
          <legend>Alert thresholds</legend>
          {thresholds.map((threshold, index) => (
            <div className="row" key={index}>
              <Field id={`threshold-type-${index}`} label={`Threshold ${index + 1} kind`}>
                <select
                  id={`threshold-type-${index}`}
                  value={threshold.type}
                  onChange={(e) => setThresholds(thresholds.map((t, i) => (i === index ? { ...t, type: e.target.value } : t)))}
                >
                  <option value="spend_above">spend above (USD)</option>
                  <option value="pct_of_limit">percent of the limit</option>
                  <option value="balance_below">balance below (USD)</option>
                </select>
              </Field>
              <Field
                id={`threshold-value-${index}`}
                label={`Threshold ${index + 1} value`}
                error={fieldError(error, `alert_thresholds[${index}]`)}
              >
                <input
                  id={`threshold-value-${index}`}
                  inputMode="decimal"
                  value={threshold.value}
                  onChange={(e) => setThresholds(thresholds.map((t, i) => (i === index ? { ...t, value: e.target.value } : t)))}
                />
              </Field>
              <button type="button" onClick={() => setThresholds(thresholds.filter((_, i) => i !== index))} aria-label={`Remove threshold ${index + 1}`}>
                Remove
              </button>
            </div>
          ))}
          <button type="button" onClick={() => setThresholds([...thresholds, { type: "pct_of_limit", value: "80" }])} disabled={thresholds.length >= 20}>
            Add threshold
          </button>
        </fieldset>
        <div className="field check">
          <input id="alert-email" type="checkbox" checked={emailAlerts} onChange={(e) => setEmailAlerts(e.target.checked)} />
          <label htmlFor="alert-email">Email alerts</label>
        </div>
        <div className="field check">
          <input id="alert-webhook" type="checkbox" checked={webhookAlerts} onChange={(e) => setWebhookAlerts(e.target.checked)} />
          <label htmlFor="alert-webhook">Also send alerts to the delivery webhook</label>
        </div>
        <ErrorLine error={unplaced(error, CONTROL_FIELDS)} />
        <button type="submit">Save spending controls</button>
        {saved && <Notice>Spending controls saved.</Notice>}
      </form>
    </section>
  );
}

function AutoTopup() {
  const [params] = useSearchParams();
  const loaded = useLoad(() => call(api.GET("/v1/billing/auto-topup")));
  const cardSaved = Boolean(loaded.data?.auto_topup.payment_method);
  // A purchase saves its card when the processor's webhook lands: look again until it shows.
  useEffect(() => {
    if (params.get("checkout") !== "success" || cardSaved) return;
    const timer = window.setInterval(() => void loaded.reload(), 1500);
    const stop = window.setTimeout(() => window.clearInterval(timer), 30000);
    return () => {
      window.clearInterval(timer);
      window.clearTimeout(stop);
    };
  }, [params, cardSaved, loaded.reload]);
  const attempts = useLoad(() => call(api.GET("/v1/billing/auto-topup/attempts")));
  const [enabled, setEnabled] = useState(false);
  const [trigger, setTrigger] = useState("");
  const [amount, setAmount] = useState("");
  const [cap, setCap] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  // Edited since it was last filled from the API: a reload (the card looked for after a
  // purchase) then leaves the form as the person is typing it.
  const [edited, setEdited] = useState(false);
  useEffect(() => {
    const s = loaded.data?.auto_topup;
    if (!s || edited) return;
    setEnabled(s.enabled);
    setTrigger(s.trigger_balance.amount);
    setAmount(s.amount.amount);
    setCap(s.monthly_cap.amount);
  }, [loaded.data, edited]);
  function edit<T>(set: (value: T) => void): (value: T) => void {
    return (value) => {
      setEdited(true);
      set(value);
    };
  }
  async function save(event: FormEvent) {
    event.preventDefault();
    setSaved(false);
    const refused = notPlain(
      "invalid_auto_topup",
      [
        ["trigger_balance", trigger],
        ["amount", amount],
        ["monthly_cap", cap],
      ],
      2,
    );
    if (refused) return setError(refused);
    const body = { enabled, trigger_balance: trigger, amount, monthly_cap: cap } as unknown as Schemas["AutoTopupUpdate"];
    try {
      loaded.setData(await call(api.PUT("/v1/billing/auto-topup", { body })));
      setEdited(false);
      setError(null);
      setSaved(true);
    } catch (caught) {
      setError(caught);
    }
  }
  const card = loaded.data?.auto_topup.payment_method;
  return (
    <section aria-labelledby="topup-h">
      <h2 id="topup-h">Auto top-up</h2>
      <ErrorLine error={loaded.error} />
      <p>Saved card: {card ? `${card.brand} ending ${card.last4}` : "none yet (buy credits once to save one)"}</p>
      <form onSubmit={(e) => void save(e)}>
        <div className="field check">
          <input id="topup-enabled" type="checkbox" checked={enabled} onChange={(e) => edit(setEnabled)(e.target.checked)} />
          <label htmlFor="topup-enabled">Top up automatically</label>
        </div>
        <div className="row">
          <Field id="topup-trigger" label="When the balance falls below (USD)" hint={PLAIN} error={fieldError(error, "trigger_balance")}>
            <input id="topup-trigger" inputMode="decimal" value={trigger} onChange={(e) => edit(setTrigger)(e.target.value)} />
          </Field>
          <Field id="topup-amount" label="Add (USD)" hint={PLAIN} error={fieldError(error, "amount")}>
            <input id="topup-amount" inputMode="decimal" value={amount} onChange={(e) => edit(setAmount)(e.target.value)} />
          </Field>
          <Field id="topup-cap" label="At most per month (USD)" hint={PLAIN} error={fieldError(error, "monthly_cap")}>
            <input id="topup-cap" inputMode="decimal" value={cap} onChange={(e) => edit(setCap)(e.target.value)} />
          </Field>
        </div>
        <ErrorLine error={unplaced(error, ["trigger_balance", "amount", "monthly_cap"])} />
        <button type="submit">Save auto top-up</button>
        {saved && <Notice>Auto top-up saved.</Notice>}
      </form>
      <h3>Attempts</h3>
      <ErrorLine error={attempts.error} />
      {attempts.data && attempts.data.data.length === 0 && <p>No top-ups yet.</p>}
      {attempts.data && attempts.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Amount</th>
              <th scope="col">Status</th>
              <th scope="col">Reason</th>
            </tr>
          </thead>
          <tbody>
            {attempts.data.data.map((a) => (
              <tr key={a.id}>
                <td>{when(a.created_at)}</td>
                <td>{money(a.amount)}</td>
                <td>{a.status}</td>
                <td>{a.failure_reason ?? "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

const CHANGE_LABELS: Record<string, string> = {
  configured: "Configured",
  limit_enabled: "Spending limit",
  limit_period: "Period",
  limit_amount: "Limit",
  limit_mode: "When reached",
  limit_timezone: "Time zone",
  low_balance_amount: "Low-balance alert",
  alert_thresholds: "Alert thresholds",
  alert_email_enabled: "Email alerts",
  alert_webhook_enabled: "Webhook alerts",
};

const THRESHOLD_LABELS: Record<string, string> = {
  spend_above: "spend above",
  balance_below: "balance below",
  pct_of_limit: "percent of the limit",
};

/** One value of an audit entry's `before` / `after` as a person reads it. */
function shownValue(value: unknown): string {
  if (value === null || value === undefined) return "none";
  if (typeof value === "boolean") return value ? "on" : "off";
  if (Array.isArray(value)) return value.length === 0 ? "none" : value.map(shownValue).join(", ");
  if (typeof value === "object") {
    const entry = value as Record<string, unknown>;
    if (typeof entry.amount === "string" && typeof entry.currency === "string") {
      return money({ amount: entry.amount, currency: entry.currency });
    }
    if (typeof entry.type === "string" && "value" in entry) {
      const shown = entry.type === "pct_of_limit" ? `${String(entry.value)}%` : shownValue(entry.value);
      return `${THRESHOLD_LABELS[entry.type] ?? entry.type} ${shown}`;
    }
    return Object.entries(entry)
      .map(([key, inner]) => `${key} ${shownValue(inner)}`)
      .join(", ");
  }
  return String(value);
}

/** An entry's change, field by field: `Limit: 250.00 USD → 300.00 USD`. */
function Change({ before, after }: { before: Record<string, unknown> | null | undefined; after: Record<string, unknown> | null | undefined }) {
  const fields = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])];
  if (fields.length === 0) return <>—</>;
  return (
    <ul className="plain">
      {fields.map((field) => (
        <li key={field}>
          {CHANGE_LABELS[field] ?? field}: {shownValue(before?.[field])} → {shownValue(after?.[field])}
        </li>
      ))}
    </ul>
  );
}

function AuditLog({ data, error, more }: { data: AuditPage | undefined; error: unknown; more: More }) {
  return (
    <section aria-labelledby="audit-h">
      <h2 id="audit-h">Audit log</h2>
      <ErrorLine error={error} />
      {data && data.data.length === 0 && <p>No changes yet.</p>}
      {data && data.data.length > 0 && (
        <table data-testid="audit-log">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Who</th>
              <th scope="col">Action</th>
              <th scope="col">Change</th>
            </tr>
          </thead>
          <tbody>
            {data.data.map((entry) => (
              <tr key={entry.id}>
                <td>{when(entry.created_at)}</td>
                <td>{entry.actor_role ?? "system"}</td>
                <td>{entry.action}</td>
                <td>
                  <Change before={entry.before as Record<string, unknown> | null} after={entry.after as Record<string, unknown> | null} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <LoadMore what="changes" more={more} />
    </section>
  );
}
