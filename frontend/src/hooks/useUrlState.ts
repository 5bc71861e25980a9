import { useCallback, useMemo, useState } from "react";
import { useSearchParams } from "react-router-dom";

/** A page's filters as strings, each with its default (left out of the URL). */
export type UrlFields = Record<string, string>;

/**
 * A list page's filters, time range and page offset kept in the URL's query, so a
 * filtered view is a link to share and the browser's back button undoes a change.
 * A value equal to its default is left out of the URL; `replace` edits the current
 * history entry (a text field as it is typed) instead of adding one. Any change
 * that does not set `offset` goes back to the first page.
 */
export function useUrlState<T extends UrlFields>(defaults: T) {
  const [params, setParams] = useSearchParams();
  const values = useMemo(() => {
    const out: UrlFields = {};
    for (const [name, fallback] of Object.entries(defaults)) out[name] = params.get(name) ?? fallback;
    return out as T;
    // `defaults` is a constant of the page.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [params]);
  const set = useCallback(
    (patch: Partial<T>, options: { replace?: boolean } = {}) => {
      setParams(
        (current) => {
          const next = new URLSearchParams(current);
          const changes: UrlFields = { ...(patch as UrlFields) };
          if ("offset" in defaults && !("offset" in changes)) changes.offset = defaults.offset;
          for (const [name, value] of Object.entries(changes)) {
            if (value === undefined || value === defaults[name]) next.delete(name);
            else next.set(name, value);
          }
          return next;
        },
        { replace: options.replace ?? false },
      );
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [setParams],
  );
  return [values, set] as const;
}

/** `value` when it is one of `allowed`, else "" (a hand-edited or stale link). */
export function oneOf<T extends string>(value: string, allowed: readonly T[]): T | "" {
  return (allowed as readonly string[]).includes(value) ? (value as T) : "";
}

/** A page offset from the URL: a non-negative integer, else 0. */
export function offsetOf(value: string): number {
  const n = Number(value);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

export const TIME_RANGES = ["1h", "24h", "7d", "30d", "90d"] as const;
export type TimeRange = (typeof TIME_RANGES)[number];
export const TIME_RANGE_NAMES: Record<TimeRange, string> = {
  "1h": "last hour",
  "24h": "last 24 h",
  "7d": "last 7 days",
  "30d": "last 30 days",
  "90d": "last 90 days",
};
const RANGE_MS: Record<TimeRange, number> = {
  "1h": 3_600_000,
  "24h": 86_400_000,
  "7d": 7 * 86_400_000,
  "30d": 30 * 86_400_000,
  "90d": 90 * 86_400_000,
};

/** The start of a time range (to the minute, so a query's key holds still for a minute),
 * or undefined for all time. */
export function sinceOf(range: TimeRange | "", now: number = Date.now()): string | undefined {
  if (!range) return undefined;
  const minute = Math.floor(now / 60_000) * 60_000;
  return new Date(minute - RANGE_MS[range]).toISOString();
}

/**
 * A text field bound to a URL value. Navigations are transitions, so a field whose value
 * came straight from the URL would lose keys typed before the URL caught up: the field
 * keeps what is typed, sends it to the URL, and takes the URL's value only when the URL
 * changed otherwise (the back button, a link).
 */
export function useUrlText(urlValue: string, commit: (value: string) => void) {
  const [draft, setDraft] = useState(urlValue);
  const [seen, setSeen] = useState(urlValue);
  const [ours, setOurs] = useState<string[]>([]); // sent, not yet seen in the URL
  if (urlValue !== seen) {
    setSeen(urlValue);
    const at = ours.indexOf(urlValue);
    if (at >= 0) {
      setOurs(ours.slice(at + 1));
    } else {
      setOurs([]);
      setDraft(urlValue);
    }
  }
  const change = (typed: string, sent: string = typed) => {
    setDraft(typed);
    if (sent !== (ours.length ? ours[ours.length - 1] : seen)) setOurs([...ours, sent]);
    commit(sent);
  };
  return [draft, change] as const;
}
