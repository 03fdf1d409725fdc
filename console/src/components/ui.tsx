// Small building blocks every page uses: the error line, a labelled field, a loading state.
import { cloneElement, isValidElement, useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { describe } from "../api/client";
import { itemsEnded, type ItemCounts } from "../format";

/** An API error as the person should read it: `code: message`, announced to screen readers. */
export function ErrorLine({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {describe(error)}
    </p>
  );
}

export function Notice({ children }: { children: ReactNode }) {
  return (
    <p className="notice" role="status">
      {children}
    </p>
  );
}

interface FieldProps {
  id: string;
  label: string;
  error?: string | undefined;
  hint?: string;
  children: ReactNode;
}

/** A control with its label and, under it, the server's validation error for that field;
 * the control is marked invalid and described by its hint and error for screen readers. */
export function Field({ id, label, error, hint, children }: FieldProps) {
  const describedBy = [hint ? `${id}-hint` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ");
  const control = isValidElement<Record<string, unknown>>(children)
    ? cloneElement(children, {
        "aria-invalid": error ? true : undefined,
        "aria-describedby": describedBy || undefined,
      })
    : children;
  return (
    <div className={error ? "field invalid" : "field"}>
      <label htmlFor={id}>{label}</label>
      {control}
      {hint && <small id={`${id}-hint`}>{hint}</small>}
      {error && (
        <small className="field-error" id={`${id}-error`} role="alert">
          {error}
        </small>
      )}
    </div>
  );
}

/** How often a page that follows live work (batches running or settling) asks again. */
export const POLL_MS = 2000;

/** Load something once (and again on `reload`), keeping the error for the page to show. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  // `deps` say when `load` must run again (the page's filters), as in useEffect.
  const run = useCallback(load, deps);
  // An answer is drawn only if no later call's answer was drawn before it: an older one that
  // lands late (a poll slower than the filter change after it) never covers the newer.
  const calls = useRef(0);
  const drawn = useRef(0);
  const reload = useCallback(async () => {
    const call = ++calls.current;
    try {
      const answer = await run();
      if (call < drawn.current) return;
      drawn.current = call;
      setData(answer);
      setError(null);
    } catch (caught) {
      if (call < drawn.current) return;
      drawn.current = call;
      setError(caught);
    } finally {
      if (call >= drawn.current) setLoading(false);
    }
  }, [run]);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, loading, reload, setData };
}

/** What a list shows when it has nothing in it: a sentence (and where to go), never bare headers. */
export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

export function Loading({ what }: { what: string }) {
  return <p aria-busy="true">Loading {what}…</p>;
}

interface ProgressProps {
  done: number;
  total: number;
  label: string;
  text?: string;
}

export function ProgressBar({ done, total, label, text }: ProgressProps) {
  const pct = total > 0 ? Math.round((100 * done) / total) : 0;
  return (
    <div className="progress">
      <progress max={total || 1} value={Math.min(done, total || 1)} aria-label={label} />
      <span>
        {text ?? `${done}/${total}`} ({pct}%)
      </span>
    </div>
  );
}

/** A batch's progress bar, the same on every page (`itemsEnded` of all items). */
export function BatchProgress({ counts, label }: { counts: ItemCounts; label: string }) {
  return <ProgressBar label={label} done={itemsEnded(counts)} total={counts.total} />;
}
