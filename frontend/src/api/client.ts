// The one way the UI talks to the dashboard API: typed, enveloped, errors as ApiError.
import type { components } from "./schema";

export const API_BASE: string = import.meta.env.VITE_API_URL ?? "/api";

/** Mutations authenticated by the session cookie need this header (CSRF). */
export const CSRF_HEADER = "X-Butlers-CSRF";

export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly butler: string | null;
  readonly details: unknown;

  constructor(
    code: string,
    message: string,
    status: number,
    butler: string | null = null,
    details: unknown = null,
  ) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.status = status;
    this.butler = butler;
    this.details = details;
  }
}

type ErrorResponse = components["schemas"]["ErrorResponse"];

function isErrorResponse(body: unknown): body is ErrorResponse {
  return (
    typeof body === "object" &&
    body !== null &&
    "error" in body &&
    typeof (body as { error: unknown }).error === "object"
  );
}

/** Where the browser goes when the API needs a token (token mode). */
export function loginUrl(): string {
  const here = window.location.pathname + window.location.search;
  return `/login?next=${encodeURIComponent(here)}`;
}

export interface FetchOptions extends Omit<RequestInit, "body"> {
  body?: unknown;
  /** Query parameters; undefined, null and "" values are left out. */
  params?: Record<string, string | number | boolean | null | undefined>;
}

export function withParams(path: string, params?: FetchOptions["params"]): string {
  if (!params) return path;
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") continue;
    search.set(key, String(value));
  }
  const query = search.toString();
  return query ? `${path}${path.includes("?") ? "&" : "?"}${query}` : path;
}

/**
 * `fetch` of `${VITE_API_URL ?? "/api"}${path}`: JSON in, JSON out; any non-2xx answer
 * becomes an ApiError carrying the envelope's code and message.
 */
export async function apiFetch<T>(path: string, options: FetchOptions = {}): Promise<T> {
  const { body, params, headers, ...rest } = options;
  const method = (rest.method ?? "GET").toUpperCase();
  const finalHeaders = new Headers(headers);
  finalHeaders.set("Accept", "application/json");
  if (body !== undefined) finalHeaders.set("Content-Type", "application/json");
  if (method !== "GET" && method !== "HEAD") finalHeaders.set(CSRF_HEADER, "1");
  let response: Response;
  try {
    response = await fetch(`${API_BASE}${withParams(path, params)}`, {
      ...rest,
      method,
      headers: finalHeaders,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (cause) {
    throw new ApiError("NETWORK_ERROR", `the dashboard did not answer: ${String(cause)}`, 0);
  }
  const text = await response.text();
  let parsed: unknown = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!response.ok) {
    if (isErrorResponse(parsed)) {
      const e = parsed.error;
      throw new ApiError(e.code, e.message, response.status, e.butler ?? null, e.details ?? null);
    }
    throw new ApiError(
      "HTTP_ERROR",
      `${method} ${path} answered ${response.status} ${response.statusText}`.trim(),
      response.status,
    );
  }
  if (parsed === null && text) {
    throw new ApiError("INVALID_RESPONSE", `${method} ${path} did not answer JSON`, response.status);
  }
  return parsed as T;
}
