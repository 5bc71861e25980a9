import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";

import { ApiError, loginUrl } from "../api/client";

/** A session that ended (signed out elsewhere, expired) sends the browser to sign in. */
function signInAgain(error: unknown): void {
  if (error instanceof ApiError && error.status === 401 && error.code === "UNAUTHORIZED") {
    window.location.assign(loginUrl());
  }
}

/** The seed's defaults: data is fresh for 30 s, a failed query is retried once. */
export function createQueryClient(): QueryClient {
  return new QueryClient({
    queryCache: new QueryCache({ onError: signInAgain }),
    mutationCache: new MutationCache({ onError: signInAgain }),
    defaultOptions: {
      queries: {
        staleTime: 30_000,
        retry: (count, error) =>
          count < 1 && !(error instanceof ApiError && error.status >= 400 && error.status < 500),
      },
    },
  });
}
