// What routing saved: the charge beside the same tokens at each model's reference vendor's
// list and batch prices (docs/routing.md, "What routing saved"). Shown on a batch's receipt
// and on the overview for the current period. A negative saving is shown as it is.
import type { Schemas } from "../api/client";
import { money } from "../format";

type Savings = Schemas["SavingsOut"];

export function SavingsFacts({ savings, asOf, label }: { savings: Savings; asOf?: string | null; label: string }) {
  return (
    <>
      <dl className="facts" aria-label={label} data-testid="savings">
        <dt>Charged</dt>
        <dd>{money(savings.charged)}</dd>
        <dt>At the reference list price</dt>
        <dd>{money(savings.reference_list_price)}</dd>
        <dt>At the reference batch price</dt>
        <dd>{money(savings.reference_batch_price)}</dd>
        <dt>Saved against the list price</dt>
        <dd data-testid="saved-vs-list">{money(savings.saved_vs_list_price)}</dd>
        <dt>Saved against the batch price</dt>
        <dd data-testid="saved-vs-batch">{money(savings.saved_vs_batch_price)}</dd>
      </dl>
      {asOf && <small>Reference prices as of {asOf.slice(0, 10)}.</small>}
    </>
  );
}
