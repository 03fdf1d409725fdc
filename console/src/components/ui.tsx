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

/** A page of a list the API pages with `next_cursor` (null at the end). */
export interface Paged<Row> {
  data: Row[];
  next_cursor: string | null;
}

/** A list the API pages: its first page, and `more` ("Load more") appends the next one by the
 * API's `next_cursor`. `reload` (a poll) reads again as many pages as are shown, each from the
 * fresh cursor of the one before, so a row that moved between pages is neither lost nor shown
 * twice; a change of `deps` (a filter) starts over from the first page. A page may hold fewer
 * rows than asked for: only `next_cursor` says whether there are more. */
export function usePaged<Row, P extends Paged<Row>>(loadPage: (cursor: string | null) => Promise<P>, deps: unknown[] = []) {
  const readPage = useCallback(loadPage, deps);
  // How many pages are shown, for the list of these `deps` (`of`).
  const shown = useRef({ of: readPage, pages: 1 });
  const list = useLoad(async () => {
    if (shown.current.of !== readPage) shown.current = { of: readPage, pages: 1 };
    let page = await readPage(null);
    const data = [...page.data];
    for (let read = 1; read < shown.current.pages && page.next_cursor; read++) {
      page = await readPage(page.next_cursor);
      data.push(...page.data);
    }
    return { ...page, data };
  }, [readPage]);
  const [more, setMore] = useState<{ busy: boolean; error: unknown }>({ busy: false, error: null });
  useEffect(() => setMore({ busy: false, error: null }), [readPage]);
  const { data, setData } = list;
  const loadMore = useCallback(async () => {
    const from = data?.next_cursor;
    if (!from || shown.current.of !== readPage) return;
    // Counted before the read, so a poll under way reads this page too.
    shown.current.pages += 1;
    setMore({ busy: true, error: null });
    try {
      const page = await readPage(from);
      // Appended only to the list it follows (not one a filter change or a poll replaced).
      setData((current) =>
        current && current.next_cursor === from && shown.current.of === readPage
          ? { ...page, data: [...current.data, ...page.data] }
          : current,
      );
      if (shown.current.of === readPage) setMore({ busy: false, error: null });
    } catch (caught) {
      if (shown.current.of !== readPage) return; // a filter change started over meanwhile
      shown.current.pages -= 1;
      setMore({ busy: false, error: caught });
    }
  }, [data, setData, readPage]);
  const paging: More = { ...more, load: loadMore, available: Boolean(data?.next_cursor) };
  return { ...list, more: paging };
}

/** A list's "Load more": whether there is more to load, a read under way, its error. */
export interface More {
  available: boolean;
  busy: boolean;
  error: unknown;
  load: () => Promise<void> | void;
}

/** Under a paged list: "Load more ..." while the API has a next page, its error if it failed. */
export function LoadMore({ what, more }: { what: string; more: More }) {
  if (!more.available && !more.error) return null;
  return (
    <div className="load-more">
      {more.available && (
        // aria-disabled, not disabled: the focus stays on the button while the page is read.
        <button type="button" aria-disabled={more.busy || undefined} onClick={() => void (more.busy ? null : more.load())}>
          Load more {what}
        </button>
      )}
      {more.busy && <small role="status">Loading more {what}…</small>}
      <ErrorLine error={more.error} />
    </div>
  );
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
