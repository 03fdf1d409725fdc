// New batch: paste or upload a JSONL file, get the free quote with its lanes, create the batch
// from it. Pasted text (and a chosen file of up to PASTE_MAX_BYTES, shown in the box) goes
// through `POST /v1/files`; a larger file goes straight to storage by signed URL
// (api/upload.ts), never into the box. The quote and batch name the file by id. Lines in the
// vendor's batch format ({custom_id, method, url, body}) are sent as a `batch` file, which the
// service converts by the compat surface's mapping, as the CLI does (docs/compat.md).
import { useState, type ChangeEvent, type FormEvent } from "react";
import { useNavigate } from "react-router-dom";
import { ApiError, api, call, type Schemas } from "../api/client";
import { uploadSigned } from "../api/upload";
import { bytes as size, money, when } from "../format";
import { ErrorLine, Field } from "../components/ui";

type Quote = Schemas["QuoteOut"];
type Lane = Quote["quote_lanes"][number];
type Issue = Schemas["PreflightIssue"];
type RoutingMode = NonNullable<Schemas["QuoteModelRequest"]["routing_mode"]>;
type PrivacyTier = NonNullable<Schemas["QuoteModelRequest"]["privacy_tier"]>;

const SAMPLE = JSON.stringify({
  customer_item_id: "item-1",
  operation: "responses",
  model: "gpt-4o-mini",
  input: { messages: [{ role: "user", content: "Say hello." }] },
});

/** A chosen file up to this size is shown in the paste box; a larger one is uploaded as it is. */
const PASTE_MAX_BYTES = 1024 * 1024;
/** How much of a large file is read to tell vendor lines from native items. */
const PURPOSE_SAMPLE_BYTES = 1024 * 1024;

/** The fields that make a line a vendor batch line (the CLI's and the service's rule). */
const VENDOR_FIELDS = ["custom_id", "url", "method"];

/** `batch` when any line is a vendor batch line, else `batch_input` (native items). */
function filePurpose(text: string): "batch" | "batch_input" {
  const vendor = text.split("\n").some((line) => {
    try {
      const parsed: unknown = JSON.parse(line);
      return typeof parsed === "object" && parsed !== null && VENDOR_FIELDS.some((f) => f in parsed);
    } catch {
      return false; // not JSON: the service's checks name the line
    }
  });
  return vendor ? "batch" : "batch_input";
}

/** A large file's purpose, from its whole lines in the first PURPOSE_SAMPLE_BYTES. */
async function largeFilePurpose(file: File): Promise<"batch" | "batch_input"> {
  const sample = await file.slice(0, PURPOSE_SAMPLE_BYTES).text();
  const whole = file.size > PURPOSE_SAMPLE_BYTES ? sample.slice(0, sample.lastIndexOf("\n") + 1) : sample;
  return filePurpose(whole);
}

/** The refusal's issues in the order of the lines they name (the service lists each item's
 * own problems first, then what a model group's checks found); issues naming no line last. */
function preflightIssues(error: unknown): Issue[] {
  if (!(error instanceof ApiError)) return [];
  const preflight = error.details["preflight"] as { errors?: Issue[] } | undefined;
  const byLine = (issue: Issue) => issue.line ?? Number.POSITIVE_INFINITY;
  return [...(preflight?.errors ?? [])].sort((a, b) => byLine(a) - byLine(b));
}

export function Quotes() {
  const navigate = useNavigate();
  const [text, setText] = useState("");
  const [routingMode, setRoutingMode] = useState<RoutingMode>("cheapest");
  const [privacyTier, setPrivacyTier] = useState<PrivacyTier>("standard");
  const [quote, setQuote] = useState<Quote | null>(null);
  const [file, setFile] = useState<Schemas["FileOut"] | null>(null);
  // A chosen file too large for the box: uploaded as it is when quoted.
  const [large, setLarge] = useState<File | null>(null);
  const [sent, setSent] = useState<number | null>(null);
  // The large file once uploaded: quoting it again (another routing mode) sends nothing again.
  const [largeUploaded, setLargeUploaded] = useState<{ source: File; file: Schemas["FileOut"] } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [createError, setCreateError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  // Said next to the box by the console itself (not the browser's tooltip) when there is nothing to quote.
  const [noItems, setNoItems] = useState(false);

  async function readUpload(event: ChangeEvent<HTMLInputElement>) {
    const chosen = event.target.files?.[0];
    if (!chosen) return;
    setFile(null);
    if (chosen.size > PASTE_MAX_BYTES) {
      setLarge(chosen);
      setText("");
    } else {
      setLarge(null);
      setText(await chosen.text());
    }
  }

  async function pasted(): Promise<Schemas["FileOut"]> {
    const uploaded = await call(
      api.POST("/v1/files", {
        params: { query: { purpose: filePurpose(text) } },
        body: text as never,
        bodySerializer: (body: unknown) => body as string,
        headers: { "Content-Type": "application/jsonl" },
      }),
    );
    return uploaded.file;
  }

  async function uploadLarge(chosen: File): Promise<Schemas["FileOut"]> {
    if (largeUploaded?.source === chosen) return largeUploaded.file;
    const uploaded = await uploadSigned(chosen, await largeFilePurpose(chosen), setSent);
    setLargeUploaded({ source: chosen, file: uploaded });
    return uploaded;
  }

  async function getQuote(event: FormEvent) {
    event.preventDefault();
    setNoItems(!large && text.trim() === "");
    if (!large && text.trim() === "") return;
    setBusy(true);
    setQuote(null);
    setFile(null);
    setError(null);
    setCreateError(null);
    try {
      const uploaded = large ? await uploadLarge(large) : await pasted();
      setSent(null);
      setFile(uploaded);
      const body = { input_file_id: uploaded.id, routing_mode: routingMode, privacy_tier: privacyTier };
      setQuote(await call(api.POST("/v1/quotes/model", { body })));
    } catch (caught) {
      setSent(null);
      setError(caught);
    } finally {
      setBusy(false);
    }
  }

  async function createBatch() {
    if (!quote) return;
    setBusy(true);
    setCreateError(null);
    try {
      const created = (await call(
        api.POST("/v1/batches", {
          body: { quote_id: quote.quote_id },
          params: { header: { "Idempotency-Key": `console-${quote.quote_id}` } },
        }),
      )) as { batch?: { id?: string } };
      if (created.batch?.id) navigate(`/batches/${created.batch.id}`);
    } catch (caught) {
      setCreateError(caught); // shown next to the button that caused it
    } finally {
      setBusy(false);
    }
  }

  const lanes: Lane[] = quote?.quote_lanes ?? [];
  // A line the quote's refusal names is shown there; the upload's own list keeps the others.
  const issues = preflightIssues(error);
  const named = new Set(issues.map((issue) => issue.line));
  const fileOnly = (file?.errors ?? []).filter((issue) => !named.has(issue.line));
  return (
    <>
      <h1>New batch</h1>
      <p>
        One item per line: <code>customer_item_id</code>, <code>operation</code>, <code>model</code>, <code>input</code>; or the
        vendor&apos;s batch lines <code>{"{custom_id, method, url, body}"}</code>, as the CLI takes them. A quote is free and
        reserves nothing; creating the batch reserves its credits.
      </p>
      <form onSubmit={(e) => void getQuote(e)}>
        <Field id="jsonl-file" label="Upload a JSONL file">
          <input id="jsonl-file" type="file" accept=".jsonl,.json,.txt,application/jsonl" onChange={(e) => void readUpload(e)} />
        </Field>
        {large && (
          <p data-testid="large-file">
            <code>{large.name}</code> ({size(large.size)}){" "}
            {file ? (
              <>
                was uploaded as <code>{file.id}</code>.
              </>
            ) : sent !== null ? (
              `is being uploaded: ${size(sent)} of ${size(large.size)} sent.`
            ) : (
              "is too large to show here: it is uploaded as it is when you quote."
            )}
          </p>
        )}
        <Field
          id="jsonl-text"
          label="Or paste JSONL"
          hint={`Example: ${SAMPLE}`}
          error={noItems && text.trim() === "" ? "Paste JSONL or upload a file first: there is nothing to quote." : undefined}
        >
          <textarea
            id="jsonl-text"
            rows={8}
            value={text}
            onChange={(e) => {
              setLarge(null); // typing here quotes what is typed, not the chosen file
              setText(e.target.value);
            }}
            spellCheck={false}
          />
        </Field>
        <div className="row">
          <Field id="routing-mode" label="Routing mode">
            <select id="routing-mode" value={routingMode} onChange={(e) => setRoutingMode(e.target.value as RoutingMode)}>
              {["cheapest", "sla_aware", "public_only", "edge_only", "hybrid", "privacy_constrained"].map((m) => (
                <option key={m}>{m}</option>
              ))}
            </select>
          </Field>
          <Field id="privacy-tier" label="Privacy tier">
            <select id="privacy-tier" value={privacyTier} onChange={(e) => setPrivacyTier(e.target.value as PrivacyTier)}>
              {["standard", "confidential", "restricted"].map((m) => (
                <option key={m}>{m}</option>
              ))}
            </select>
          </Field>
        </div>
        <button type="submit" disabled={busy}>
          Get a free quote
        </button>
      </form>
      <ErrorLine error={error} />
      {issues.length > 0 && (
        <ul className="issues">
          {issues.map((issue, index) => (
            <li key={index}>
              {issue.line !== undefined && `line ${issue.line}: `}
              <code>{issue.code}</code> {issue.message} — {issue.action}
            </li>
          ))}
        </ul>
      )}
      {fileOnly.length > 0 && (
        <ul className="issues">
          {fileOnly.map((issue) => (
            <li key={issue.line}>
              line {issue.line}: <code>{issue.code}</code> {issue.message}
            </li>
          ))}
        </ul>
      )}
      {quote && (
        <section aria-labelledby="quote-h">
          <h2 id="quote-h">
            Quote <code>{quote.quote_id}</code>
          </h2>
          <p>{quote.customer_explanation}</p>
          <dl className="facts">
            <dt>Items</dt>
            <dd>{quote.item_count}</dd>
            <dt>Estimated total</dt>
            <dd data-testid="quote-total">{money(quote.pricing_estimate.total)}</dd>
            <dt>Provider subtotal / service fee</dt>
            <dd>
              {money(quote.pricing_estimate.provider_subtotal)} / {money(quote.pricing_estimate.service_fee)}
            </dd>
            <dt>Available credit</dt>
            <dd>
              {money(quote.funding.available)} {quote.funding.sufficient ? "" : "(not enough: buy credits first)"}
            </dd>
            <dt>Price held until</dt>
            <dd>{when(quote.expires_at)}</dd>
          </dl>
          {quote.preflight.warnings.length > 0 && (
            <ul className="issues" aria-label="Warnings" data-testid="quote-warnings">
              {quote.preflight.warnings.map((w, index) => (
                <li key={index}>
                  {w.line !== undefined && `line ${w.line}: `}
                  <code>{w.code}</code> {w.message} {w.action}
                </li>
              ))}
            </ul>
          )}
          <table>
            <caption>Lanes considered</caption>
            <thead>
              <tr>
                <th scope="col">Provider</th>
                <th scope="col">Model</th>
                <th scope="col">Chosen</th>
                <th scope="col">Items / estimate, or reason</th>
              </tr>
            </thead>
            <tbody>
              {lanes.map((lane, index) => (
                <tr key={`${lane.lane_id}-${index}`}>
                  <td>{lane.provider}</td>
                  <td>{lane.model}</td>
                  <td>{lane.selected ? "yes" : "no"}</td>
                  <td>
                    {"rejection" in lane && lane.rejection
                      ? `${lane.rejection.code}: ${lane.rejection.message}`
                      : "item_count" in lane
                        ? `${lane.item_count} items, ${money(lane.estimated_provider_cost)}`
                        : ""}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <button type="button" onClick={() => void createBatch()} disabled={busy} aria-describedby="create-error">
            Create batch from this quote
          </button>
          <div id="create-error">
            <ErrorLine error={createError} />
          </div>
        </section>
      )}
    </>
  );
}
