// The one way the UI talks to the dashboard API: requests typed from the API's OpenAPI
// schema (`paths` in schema.d.ts: path, path parameters, query, body and answer), the
// envelope's errors as ApiError.
import type { components, paths } from "./schema";

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

// -- types from the schema ----------------------------------------------------------

export type Method = "get" | "post" | "put" | "patch" | "delete";

/** The API's paths that answer `M`. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P][M] extends undefined ? never : P;
}[keyof paths];

/** The operation of `M` on path `P`. */
export type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type Parameters<O> = O extends { parameters: infer X } ? X : never;

/** The query parameters of an operation (its schema's names, types and enums). */
export type QueryOf<O> = Parameters<O> extends { query?: infer Q } ? NonNullable<Q> : never;

/** The JSON body a 200 (or 201) answer of an operation carries. */
export type AnswerOf<O> = O extends {
  responses: { 200: { content: { "application/json": infer T } } };
}
  ? T
  : O extends { responses: { 201: { content: { "application/json": infer T } } } }
    ? T
    : unknown;

/** The answer of `GET P`. */
export type Answer<P extends PathsWith<"get">> = AnswerOf<Operation<P, "get">>;
/** The query of `GET P`. */
export type Query<P extends PathsWith<"get">> = QueryOf<Operation<P, "get">>;

type PathPart<O> =
  Parameters<O> extends { path: infer X } ? ([X] extends [never] ? { path?: never } : { path: X }) : { path?: never };
type QueryPart<O> =
  Parameters<O> extends { query: infer Q }
    ? [Q] extends [never]
      ? { query?: never }
      : { query: Q }
    : Parameters<O> extends { query?: infer Q }
      ? { query?: Q }
      : { query?: never };
type BodyPart<O> = O extends { requestBody: { content: { "application/json": infer B } } }
  ? { body: B }
  : O extends { requestBody?: { content: { "application/json": infer B } } }
    ? { body?: B }
    : { body?: never };

/** What a request of an operation needs: path parameters, query and body as typed. */
export type RequestOf<O> = PathPart<O> & QueryPart<O> & BodyPart<O> & { signal?: AbortSignal };

type Args<O> = object extends RequestOf<O> ? [request?: RequestOf<O>] : [request: RequestOf<O>];

// -- the request --------------------------------------------------------------------

type QueryValue = string | number | boolean | null | undefined;

/** `path` with its query: undefined, null and "" values are left out, lists repeated. */
export function withParams(path: string, params?: Record<string, QueryValue | readonly QueryValue[]>): string {
  if (!params) return path;
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item === undefined || item === null || item === "") continue;
      search.append(key, String(item));
    }
  }
  const query = search.toString();
  return query ? `${path}${path.includes("?") ? "&" : "?"}${query}` : path;
}

/** A schema path with its `{name}` parameters filled in (encoded), without the "/api" the
 * API's paths start with (API_BASE stands for it). */
export function fillPath(template: string, values?: Record<string, string | number>): string {
  const filled = template.replace(/\{([^}]+)\}/g, (_all, name: string) => {
    const value = values?.[name];
    if (value === undefined || value === "") throw new Error(`${template}: no value for {${name}}`);
    return encodeURIComponent(String(value));
  });
  return filled.replace(/^\/api(?=\/|$)/, "");
}

/** `method path` of the API: path parameters, query and body typed from the schema. */
export function request<M extends Method, P extends PathsWith<M>>(
  method: M,
  path: P,
  ...[options]: Args<Operation<P, M>>
): Promise<AnswerOf<Operation<P, M>>> {
  const { path: values, query, body, signal } = (options ?? {}) as {
    path?: Record<string, string | number>;
    query?: Record<string, QueryValue | readonly QueryValue[]>;
    body?: unknown;
    signal?: AbortSignal;
  };
  return send(method.toUpperCase(), withParams(fillPath(path, values), query), body, signal) as Promise<
    AnswerOf<Operation<P, M>>
  >;
}

export const api = {
  get: <P extends PathsWith<"get">>(path: P, ...args: Args<Operation<P, "get">>) =>
    request("get", path, ...args),
  post: <P extends PathsWith<"post">>(path: P, ...args: Args<Operation<P, "post">>) =>
    request("post", path, ...args),
  put: <P extends PathsWith<"put">>(path: P, ...args: Args<Operation<P, "put">>) =>
    request("put", path, ...args),
  patch: <P extends PathsWith<"patch">>(path: P, ...args: Args<Operation<P, "patch">>) =>
    request("patch", path, ...args),
  delete: <P extends PathsWith<"delete">>(path: P, ...args: Args<Operation<P, "delete">>) =>
    request("delete", path, ...args),
};

/**
 * `fetch` of `${VITE_API_URL ?? "/api"}${path}`: JSON in, JSON out; any non-2xx answer
 * becomes an ApiError carrying the envelope's code and message.
 */
async function send(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
  const headers = new Headers({ Accept: "application/json" });
  if (body !== undefined) headers.set("Content-Type", "application/json");
  if (method !== "GET" && method !== "HEAD") headers.set(CSRF_HEADER, "1");
  let response: Response;
  try {
    response = await fetch(`${API_BASE}${path}`, {
      method,
      headers,
      signal,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (cause) {
    if (signal?.aborted) throw cause;
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
  return parsed;
}
