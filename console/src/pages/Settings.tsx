// Settings: profile, the org's delivery webhook, delivery targets (with a test), retention.
// Secrets typed here (webhook secret, bucket secret key) are sent once and never shown again.
import { useEffect, useState, type FormEvent } from "react";
import { ApiError, api, call, type Schemas } from "../api/client";
import { when } from "../format";
import { Empty, ErrorLine, Field, Loading, Notice, useLoad } from "../components/ui";

function onField(error: unknown, field: string): string | undefined {
  if (error instanceof ApiError && error.field === field) return `${error.code}: ${error.message}`;
  return undefined;
}

export function Settings() {
  return (
    <>
      <h1>Settings</h1>
      <Profile />
      <DeliveryWebhook />
      <DeliveryTargets />
      <Retention />
    </>
  );
}

function Profile() {
  const account = useLoad(() => call(api.GET("/v1/auth/account")));
  const [orgName, setOrgName] = useState("");
  const [fullName, setFullName] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    if (!account.data) return;
    setOrgName(account.data.org.display_name ?? "");
    setFullName(account.data.user?.full_name ?? "");
  }, [account.data]);
  async function save(event: FormEvent) {
    event.preventDefault();
    try {
      account.setData(await call(api.PUT("/v1/auth/account/profile", { body: { display_name: orgName, full_name: fullName } })));
      setError(null);
      setSaved(true);
    } catch (caught) {
      setError(caught);
      setSaved(false);
    }
  }
  return (
    <section aria-labelledby="profile-h">
      <h2 id="profile-h">Profile</h2>
      <ErrorLine error={account.error} />
      {account.data && (
        <p>
          Signed in as {account.data.user?.email} ({account.data.user?.role}); plan {account.data.plan}; {account.data.members.length} member(s).
        </p>
      )}
      <form onSubmit={(e) => void save(e)}>
        <div className="row">
          <Field id="org-display-name" label="Organization name">
            <input id="org-display-name" maxLength={128} value={orgName} onChange={(e) => setOrgName(e.target.value)} />
          </Field>
          <Field id="user-full-name" label="Your name">
            <input id="user-full-name" maxLength={256} value={fullName} onChange={(e) => setFullName(e.target.value)} />
          </Field>
        </div>
        <ErrorLine error={error} />
        <button type="submit">Save profile</button>
        {saved && <Notice>Profile saved.</Notice>}
      </form>
    </section>
  );
}

function DeliveryWebhook() {
  const account = useLoad(() => call(api.GET("/v1/auth/account")));
  const [url, setUrl] = useState("");
  const [secret, setSecret] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const current = account.data?.delivery_webhook;
  async function save(event: FormEvent) {
    event.preventDefault();
    try {
      await call(api.PUT("/v1/auth/account/delivery-webhook", { body: { url, secret } }));
      setSecret("");
      setError(null);
      setSaved(true);
      await account.reload();
    } catch (caught) {
      setError(caught);
      setSaved(false);
    }
  }
  return (
    <section aria-labelledby="webhook-h">
      <h2 id="webhook-h">Delivery webhook</h2>
      <p>
        {current ? `Batches and alerts are posted to ${current.url} (set ${when(current.updated_at)}).` : "No delivery webhook: batches are polled."}
      </p>
      <form onSubmit={(e) => void save(e)}>
        <div className="row">
          <Field id="webhook-url" label="HTTPS URL">
            <input id="webhook-url" type="url" required value={url} onChange={(e) => setUrl(e.target.value)} />
          </Field>
          <Field id="webhook-secret" label="Signing secret (8-256 characters)">
            <input id="webhook-secret" type="password" autoComplete="off" required minLength={8} maxLength={256} value={secret} onChange={(e) => setSecret(e.target.value)} />
          </Field>
        </div>
        <ErrorLine error={error} />
        <button type="submit">Save webhook</button>
        {saved && <Notice>Webhook saved.</Notice>}
      </form>
    </section>
  );
}

/** A target test's outcome as one line: `ok (key)` or `failed: code message`, and when. */
function testOutcome(outcome: Schemas["LastTestOut"] | null | undefined): string {
  if (!outcome) return "—";
  const what = outcome.ok ? `ok (${outcome.key})` : `failed: ${outcome.error?.code ?? ""} ${outcome.error?.message ?? ""}`;
  return `${what.trim()}, ${when(outcome.at)}`;
}

function DeliveryTargets() {
  const targets = useLoad(() => call(api.GET("/v1/delivery-targets")));
  const [draft, setDraft] = useState({ name: "", bucket: "", prefix: "", region: "", endpoint_url: "", access_key_id: "", secret_access_key: "" });
  const [error, setError] = useState<unknown>(null);
  const [tests, setTests] = useState<Record<string, Schemas["TargetTestOut"]>>({});
  function set(field: keyof typeof draft, value: string) {
    setDraft({ ...draft, [field]: value });
  }
  async function create(event: FormEvent) {
    event.preventDefault();
    const body: Schemas["DeliveryTargetCreate"] = {
      bucket: draft.bucket,
      access_key_id: draft.access_key_id,
      secret_access_key: draft.secret_access_key,
      prefix: draft.prefix,
      name: draft.name || null,
      region: draft.region || null,
      endpoint_url: draft.endpoint_url || null,
      enabled: true,
    };
    try {
      await call(api.POST("/v1/delivery-targets", { body }));
      setDraft({ name: "", bucket: "", prefix: "", region: "", endpoint_url: "", access_key_id: "", secret_access_key: "" });
      setError(null);
      await targets.reload();
    } catch (caught) {
      setError(caught);
    }
  }
  async function test(id: string) {
    try {
      const result = await call(api.POST("/v1/delivery-targets/{target_id}/test", { params: { path: { target_id: id } } }));
      setTests({ ...tests, [id]: result });
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  }
  async function remove(id: string) {
    if (!window.confirm("Delete this delivery target?")) return;
    try {
      await call(api.DELETE("/v1/delivery-targets/{target_id}", { params: { path: { target_id: id } } }));
      await targets.reload();
    } catch (caught) {
      setError(caught);
    }
  }
  const fields: [keyof typeof draft, string, boolean][] = [
    ["name", "Name (optional)", false],
    ["bucket", "Bucket", true],
    ["prefix", "Key prefix (optional)", false],
    ["region", "Region (optional)", false],
    ["endpoint_url", "S3-compatible endpoint URL (optional)", false],
    ["access_key_id", "Access key id", true],
    ["secret_access_key", "Secret access key (write-only)", true],
  ];
  return (
    <section aria-labelledby="targets-h">
      <h2 id="targets-h">Delivery targets</h2>
      <p>Results, errors and receipts are pushed to these buckets when a batch finalizes.</p>
      <ErrorLine error={targets.error} />
      {targets.loading && <Loading what="delivery targets" />}
      {targets.data && targets.data.data.length === 0 && <Empty>No delivery targets yet. Results stay here to download.</Empty>}
      {targets.data && targets.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Bucket / prefix</th>
              <th scope="col">Key</th>
              <th scope="col">Last test</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {targets.data.data.map((t) => {
              const result = tests[t.id];
              return (
                <tr key={t.id}>
                  <td>{t.name ?? t.id}</td>
                  <td>
                    {t.bucket}/{t.prefix}
                  </td>
                  <td>…{t.access_key_id_last4}</td>
                  <td role="status">
                    {testOutcome(result ?? t.last_test)}
                  </td>
                  <td>
                    <button type="button" onClick={() => void test(t.id)}>
                      Test
                    </button>{" "}
                    <button type="button" onClick={() => void remove(t.id)} aria-label={`Delete ${t.name ?? t.id}`}>
                      Delete
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <form onSubmit={(e) => void create(e)}>
        <div className="row wrap">
          {fields.map(([field, label, required]) => (
            <Field key={field} id={`target-${field}`} label={label} error={onField(error, field)}>
              <input
                id={`target-${field}`}
                type={field === "secret_access_key" ? "password" : "text"}
                autoComplete="off"
                required={required}
                value={draft[field]}
                onChange={(e) => set(field, e.target.value)}
              />
            </Field>
          ))}
        </div>
        <ErrorLine error={error instanceof ApiError && error.field && fields.some(([f]) => f === error.field) ? null : error} />
        <button type="submit">Add delivery target</button>
      </form>
    </section>
  );
}

function Retention() {
  const loaded = useLoad(() => call(api.GET("/v1/retention-settings")));
  const [tier, setTier] = useState("grace_only");
  const [days, setDays] = useState("");
  const [neverCharge, setNeverCharge] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    if (!loaded.data) return;
    setTier(loaded.data.retention_tier);
    setDays(loaded.data.extended_days ? String(loaded.data.extended_days) : "");
    setNeverCharge(loaded.data.never_charge);
  }, [loaded.data]);
  async function save(event: FormEvent) {
    event.preventDefault();
    const body = {
      retention_tier: tier,
      never_charge: neverCharge,
      ...(tier === "extended_fixed" ? { extended_days: days ? Number(days) : null } : {}),
    } as Schemas["RetentionUpdate"];
    try {
      loaded.setData(await call(api.PUT("/v1/retention-settings", { body })));
      setError(null);
      setSaved(true);
    } catch (caught) {
      setError(caught);
      setSaved(false);
    }
  }
  return (
    <section aria-labelledby="retention-h">
      <h2 id="retention-h">Result retention</h2>
      <ErrorLine error={loaded.error} />
      {loaded.data && <p>Results stay downloadable for {loaded.data.grace_hours} hours on the free tier.</p>}
      <form onSubmit={(e) => void save(e)}>
        <div className="row">
          <Field id="retention-tier" label="Keep results" error={onField(error, "retention_tier")}>
            <select id="retention-tier" value={tier} onChange={(e) => setTier(e.target.value)} disabled={neverCharge}>
              <option value="grace_only">for the grace window only (free)</option>
              <option value="extended_fixed">for a number of days</option>
              <option value="until_deleted">until deleted</option>
            </select>
          </Field>
          {tier === "extended_fixed" && (
            <Field id="retention-days" label="Days (1-3650)" error={onField(error, "extended_days")}>
              <input id="retention-days" inputMode="numeric" value={days} onChange={(e) => setDays(e.target.value)} />
            </Field>
          )}
        </div>
        <div className="field check">
          <input id="never-charge" type="checkbox" checked={neverCharge} onChange={(e) => setNeverCharge(e.target.checked)} />
          <label htmlFor="never-charge">Never charge for storage (forces the free tier)</label>
        </div>
        <ErrorLine error={error instanceof ApiError && (error.field === "retention_tier" || error.field === "extended_days") ? null : error} />
        <button type="submit">Save retention</button>
        {saved && <Notice>Retention saved.</Notice>}
      </form>
    </section>
  );
}
