import { QueryClient } from "@tanstack/react-query";

import { ApiError } from "../api/client";

/** The seed's defaults: data is fresh for 30 s, a failed query is retried once. */
export function createQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        staleTime: 30_000,
        retry: (count, error) =>
          count < 1 && !(error instanceof ApiError && error.status >= 400 && error.status < 500),
      },
    },
  });
}
