// API keys: list, create (the value shown once, with a copy button), revoke.
// The value lives only in this component's state until the person leaves the page.
// Only the roles the signed-in user may grant are offered, and Revoke only on keys of those
// roles: the list's `grantable_roles`, computed by the API from the same rule it enforces
// (docs/roles.md, Granting roles). A refusal anyway (a role changed since the page loaded)
// is shown as the API's `permission_denied: ...`.
import { useRef, useState, type FormEvent } from "react";
import { api, call, type Schemas } from "../api/client";
import { when } from "../format";
import { Empty, ErrorLine, Field, Loading, useLoad } from "../components/ui";

type Role = NonNullable<Schemas["ApiKeyCreate"]["role"]>;

export function Keys() {
  const keys = useLoad(() => call(api.GET("/v1/auth/account/api-keys")));
  const [label, setLabel] = useState("");
  const [role, setRole] = useState<Role>("member");
  const grantable = keys.data?.grantable_roles ?? [];
  // The default (member) when it may be granted, else the first role that may.
  const chosen: Role | undefined = grantable.includes(role) ? role : grantable[0];
  const [created, setCreated] = useState<Schemas["ApiKeyCreated"] | null>(null);
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<unknown>(null);
  // One create at a time: a double click must not make two keys (the first one's value would
  // never be shown). The ref stops a second submit before the disabled button is drawn.
  const [creating, setCreating] = useState(false);
  const inFlight = useRef(false);

  async function create(event: FormEvent) {
    event.preventDefault();
    if (!chosen || inFlight.current) return;
    inFlight.current = true;
    setCreating(true);
    try {
      setCreated(await call(api.POST("/v1/auth/account/api-keys", { body: { label, role: chosen } })));
      setCopied(false);
      setLabel("");
      setError(null);
      await keys.reload();
    } catch (caught) {
      setError(caught);
    } finally {
      inFlight.current = false;
      setCreating(false);
    }
  }

  async function revoke(id: string, keyLabel: string) {
    if (!window.confirm(`Revoke the key "${keyLabel}"? It stops working at once.`)) return;
    try {
      await call(api.POST("/v1/auth/account/api-keys/{key_id}/revoke", { params: { path: { key_id: id } } }));
      setError(null);
      await keys.reload();
    } catch (caught) {
      setError(caught);
    }
  }

  async function copy() {
    if (!created) return;
    try {
      await navigator.clipboard.writeText(created.api_key);
      setCopied(true);
    } catch {
      setError(new Error("The browser refused the clipboard: select the key and copy it by hand."));
    }
  }

  return (
    <>
      <h1>API keys</h1>
      <form className="inline" onSubmit={(e) => void create(e)}>
        <Field id="key-label" label="Label">
          <input id="key-label" required maxLength={120} value={label} onChange={(e) => setLabel(e.target.value)} />
        </Field>
        <Field id="key-role" label="Role" hint="The roles you may grant: none can do more than yours.">
          <select
            id="key-role"
            value={chosen ?? ""}
            disabled={!chosen}
            onChange={(e) => setRole(e.target.value as Role)}
          >
            {grantable.map((option) => (
              <option key={option} value={option}>
                {option}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit" disabled={!chosen || creating}>
          Create key
        </button>
      </form>
      <ErrorLine error={error} />
      {created && (
        <section className="secret" aria-labelledby="new-key-h">
          <h2 id="new-key-h">New key "{created.key.label}"</h2>
          <p>Copy it now: it is shown once and cannot be recovered.</p>
          <code data-testid="new-key-value">{created.api_key}</code>{" "}
          <button type="button" onClick={() => void copy()}>
            {copied ? "Copied" : "Copy"}
          </button>{" "}
          <button type="button" onClick={() => setCreated(null)}>
            Done
          </button>
        </section>
      )}
      <ErrorLine error={keys.error} />
      {keys.loading && <Loading what="keys" />}
      {keys.data && keys.data.data.length === 0 && <Empty>No API keys yet. Create one above to call the API.</Empty>}
      {keys.data && keys.data.data.length > 0 && (
        <table>
          <caption>Keys of this organization</caption>
          <thead>
            <tr>
              <th scope="col">Label</th>
              <th scope="col">Prefix</th>
              <th scope="col">Role</th>
              <th scope="col">Created</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {keys.data.data.map((key) => (
              <tr key={key.id}>
                <td>{key.label}</td>
                <td>
                  <code>{key.prefix}…</code>
                </td>
                <td>{key.role}</td>
                <td>{when(key.created_at)}</td>
                <td>
                  {key.revoked_at ? (
                    `revoked ${when(key.revoked_at)}`
                  ) : grantable.includes(key.role) ? (
                    <button type="button" onClick={() => void revoke(key.id, key.label)} aria-label={`Revoke ${key.label}`}>
                      Revoke
                    </button>
                  ) : (
                    "active (a role beyond yours: you may not revoke it)"
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
