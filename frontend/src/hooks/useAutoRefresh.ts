import { useCallback, useEffect, useState } from "react";

export const REFRESH_CHOICES = [5, 10, 30, 60] as const;
export type RefreshSeconds = (typeof REFRESH_CHOICES)[number];
const STORAGE_KEY = "butlers.autoRefresh";

interface Stored {
  seconds: RefreshSeconds;
  paused: boolean;
}

function load(fallback: RefreshSeconds): Stored {
  try {
    const raw = window.localStorage.getItem(STORAGE_KEY);
    if (raw) {
      const parsed = JSON.parse(raw) as Partial<Stored>;
      const seconds = REFRESH_CHOICES.find((c) => c === parsed.seconds) ?? fallback;
      return { seconds, paused: parsed.paused === true };
    }
  } catch {
    // unreadable storage: use the default
  }
  return { seconds: fallback, paused: false };
}

/**
 * The user's auto-refresh choice (5/10/30/60 s or paused), kept in localStorage. The
 * returned `interval` is what TanStack Query's refetchInterval expects.
 */
export function useAutoRefresh(fallback: RefreshSeconds = 30) {
  const [stored, setStored] = useState<Stored>(() => load(fallback));
  useEffect(() => {
    try {
      window.localStorage.setItem(STORAGE_KEY, JSON.stringify(stored));
    } catch {
      // storage full or disabled: the choice lasts for this page only
    }
  }, [stored]);
  const setSeconds = useCallback(
    (seconds: RefreshSeconds) => setStored((s) => ({ ...s, seconds })),
    [],
  );
  const toggle = useCallback(() => setStored((s) => ({ ...s, paused: !s.paused })), []);
  return {
    seconds: stored.seconds,
    paused: stored.paused,
    interval: stored.paused ? (false as const) : stored.seconds * 1000,
    setSeconds,
    toggle,
  };
}
