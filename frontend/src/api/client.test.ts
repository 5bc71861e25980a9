import { afterEach, describe, expect, it, vi } from "vitest";

import { api, ApiError, CSRF_HEADER, fillPath, withParams } from "./client";

function respond(status: number, body: unknown) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return vi.fn(async (_url: string, _init?: RequestInit) => new Response(text, { status }));
}

afterEach(() => vi.unstubAllGlobals());

describe("api", () => {
  it("requests a schema path under API_BASE and returns the parsed envelope", async () => {
    const fetchMock = respond(200, { data: [{ name: "health" }], meta: {} });
    vi.stubGlobal("fetch", fetchMock);
    const body = await api.get("/api/butlers");
    expect(body.data[0].name).toBe("health");
    expect(fetchMock.mock.calls[0][0]).toBe("/api/butlers");
  });

  it("fills path parameters, encoded, and sends the typed query", async () => {
    const fetchMock = respond(200, { data: [], meta: {} });
    vi.stubGlobal("fetch", fetchMock);
    await api.get("/api/butlers/{name}/state", {
      path: { name: "a b" },
      query: { prefix: "x/y", limit: 5 },
    });
    expect(fetchMock.mock.calls[0][0]).toBe("/api/butlers/a%20b/state?prefix=x%2Fy&limit=5");
  });

  it("repeats list parameters and leaves out empty ones", () => {
    expect(
      withParams("/sessions", { butler: ["health", "general"], status: "", limit: 25, cursor: null }),
    ).toBe("/sessions?butler=health&butler=general&limit=25");
  });

  it("refuses a path parameter without a value", () => {
    expect(() => fillPath("/api/butlers/{name}", {})).toThrow("no value for {name}");
  });

  it("turns an ErrorResponse into an ApiError with code, message and status", async () => {
    vi.stubGlobal(
      "fetch",
      respond(404, { error: { code: "BUTLER_NOT_FOUND", message: "no butler nope", butler: "nope" } }),
    );
    const error = await api.get("/api/butlers/{name}", { path: { name: "nope" } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: "BUTLER_NOT_FOUND", status: 404, message: "no butler nope", butler: "nope" });
  });

  it("names the status when the error body is not an envelope", async () => {
    vi.stubGlobal("fetch", respond(502, "<html>bad gateway</html>"));
    await expect(api.get("/api/overview")).rejects.toMatchObject({ code: "HTTP_ERROR", status: 502 });
  });

  it("reports a network failure as an ApiError", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => Promise.reject(new TypeError("Failed to fetch"))));
    await expect(api.get("/api/overview")).rejects.toMatchObject({ code: "NETWORK_ERROR", status: 0 });
  });

  it("marks mutations with the CSRF header and sends JSON; reads do not carry it", async () => {
    const fetchMock = respond(200, { data: {}, meta: {} });
    vi.stubGlobal("fetch", fetchMock);
    await api.put("/api/butlers/{name}/state/{key}", {
      path: { name: "health", key: "a/b" },
      body: { value: null },
    });
    await api.get("/api/butlers");
    const [url, put] = fetchMock.mock.calls[0];
    const [, get] = fetchMock.mock.calls[1];
    expect(url).toBe("/api/butlers/health/state/a%2Fb");
    expect(put?.method).toBe("PUT");
    const putHeaders = new Headers(put?.headers);
    expect(putHeaders.get(CSRF_HEADER)).toBe("1");
    expect(putHeaders.get("content-type")).toBe("application/json");
    expect(put?.body).toBe('{"value":null}');
    expect(new Headers(get?.headers).get(CSRF_HEADER)).toBeNull();
  });
});

// The types themselves: each line below is a compile error (so `tsc` fails) if the
// schema's paths stop typing requests.
export function typeChecks() {
  // @ts-expect-error an unknown path
  void api.get("/api/no-such-route");
  // @ts-expect-error a status the API's enum does not have
  void api.get("/api/sessions", { query: { status: "paused" } });
  // @ts-expect-error a path parameter is required
  void api.get("/api/butlers/{name}");
  // @ts-expect-error POST only
  void api.get("/api/butlers/{name}/tick", { path: { name: "x" } });
}
