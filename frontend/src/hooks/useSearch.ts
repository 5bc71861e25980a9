import { useQuery } from "@tanstack/react-query";
import { useEffect, useState } from "react";

import { api } from "../api/client";
import { searchKeys } from "../api/keys";

export const SEARCH_DEBOUNCE_MS = 300;
export const SEARCH_MIN_LENGTH = 2;

export function useDebounced<T>(value: T, delay: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = window.setTimeout(() => setSettled(value), delay);
    return () => window.clearTimeout(timer);
  }, [value, delay]);
  return settled;
}

/** Search sessions and state, 300 ms after the last keystroke, from 2 characters on. */
export function useSearch(text: string) {
  const settled = useDebounced(text.trim(), SEARCH_DEBOUNCE_MS);
  const results = useQuery({
    queryKey: searchKeys.query(settled),
    queryFn: () =>
      api.get("/api/search", { query: { q: settled, limit: 20 } }),
    enabled: settled.length >= SEARCH_MIN_LENGTH,
    staleTime: 30_000,
  });
  return { results, settled };
}
