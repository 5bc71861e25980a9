import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError, apiFetch, CSRF_HEADER, withParams } from "./client";

function respond(status: number, body: unknown) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return vi.fn(async (_url: string, _init?: RequestInit) => new Response(text, { status }));
}

afterEach(() => vi.unstubAllGlobals());

describe("apiFetch", () => {
  it("prefixes /api and returns the parsed envelope", async () => {
    const fetchMock = respond(200, { data: [1, 2], meta: {} });
    vi.stubGlobal("fetch", fetchMock);
    const body = await apiFetch<{ data: number[] }>("/butlers");
    expect(body.data).toEqual([1, 2]);
    expect(fetchMock.mock.calls[0][0]).toBe("/api/butlers");
  });

  it("sends query parameters, leaving out empty ones", () => {
    expect(withParams("/sessions", { butler: "health", status: "", limit: 25, cursor: null })).toBe(
      "/sessions?butler=health&limit=25",
    );
  });

  it("turns an ErrorResponse into an ApiError with code, message and status", async () => {
    vi.stubGlobal(
      "fetch",
      respond(404, { error: { code: "BUTLER_NOT_FOUND", message: "no butler nope", butler: "nope" } }),
    );
    const error = await apiFetch("/butlers/nope").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: "BUTLER_NOT_FOUND", status: 404, message: "no butler nope", butler: "nope" });
  });

  it("names the status when the error body is not an envelope", async () => {
    vi.stubGlobal("fetch", respond(502, "<html>bad gateway</html>"));
    await expect(apiFetch("/overview")).rejects.toMatchObject({ code: "HTTP_ERROR", status: 502 });
  });

  it("reports a network failure as an ApiError", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => Promise.reject(new TypeError("Failed to fetch"))));
    await expect(apiFetch("/overview")).rejects.toMatchObject({ code: "NETWORK_ERROR", status: 0 });
  });

  it("marks mutations with the CSRF header and sends JSON; reads do not carry it", async () => {
    const fetchMock = respond(200, { data: {}, meta: {} });
    vi.stubGlobal("fetch", fetchMock);
    await apiFetch("/butlers/health/state/a%2Fb", { method: "PUT", body: { value: null } });
    await apiFetch("/butlers");
    const [, put] = fetchMock.mock.calls[0];
    const [, get] = fetchMock.mock.calls[1];
    const putHeaders = new Headers(put?.headers);
    expect(putHeaders.get(CSRF_HEADER)).toBe("1");
    expect(putHeaders.get("content-type")).toBe("application/json");
    expect(put?.body).toBe('{"value":null}');
    expect(new Headers(get?.headers).get(CSRF_HEADER)).toBeNull();
  });
});
