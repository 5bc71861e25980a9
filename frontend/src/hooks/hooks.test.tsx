import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, renderHook, waitFor } from "@testing-library/react";
import type { ReactNode } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { useAutoRefresh } from "./useAutoRefresh";
import { useButler } from "./useApi";
import { LiveEventsProvider } from "./useLiveEvents";
import { useSearch } from "./useSearch";

function wrapper() {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return ({ children }: { children: ReactNode }) => <QueryClientProvider client={client}>{children}</QueryClientProvider>;
}

const ok = (data: unknown) => new Response(JSON.stringify({ data, meta: {} }), { status: 200 });

afterEach(() => {
  vi.unstubAllGlobals();
  vi.useRealTimers();
  window.localStorage.clear();
});

describe("useAutoRefresh", () => {
  beforeEach(() => window.localStorage.clear());

  it("keeps the chosen interval and pause in localStorage", () => {
    const first = renderHook(() => useAutoRefresh(30));
    expect(first.result.current.interval).toBe(30_000);
    act(() => first.result.current.setSeconds(5));
    act(() => first.result.current.toggle());
    expect(first.result.current.interval).toBe(false);
    first.unmount();
    const again = renderHook(() => useAutoRefresh(30));
    expect(again.result.current.seconds).toBe(5);
    expect(again.result.current.paused).toBe(true);
  });

  it("ignores a stored value that is not one of the choices", () => {
    window.localStorage.setItem("butlers.autoRefresh", JSON.stringify({ seconds: 1, paused: false }));
    const { result } = renderHook(() => useAutoRefresh(10));
    expect(result.current.seconds).toBe(10);
  });
});

describe("useSearch", () => {
  it("waits 300 ms after the last keystroke and needs 2 characters", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    const fetchMock = vi.fn(async () => ok({ query: "we", sessions: [], state: [] }));
    vi.stubGlobal("fetch", fetchMock);
    const { result, rerender } = renderHook(({ q }) => useSearch(q), {
      wrapper: wrapper(),
      initialProps: { q: "w" },
    });
    await act(async () => vi.advanceTimersByTime(400));
    expect(fetchMock).not.toHaveBeenCalled(); // one character: no request
    rerender({ q: "we" });
    await act(async () => vi.advanceTimersByTime(100));
    rerender({ q: "wei" });
    await act(async () => vi.advanceTimersByTime(100));
    expect(fetchMock).not.toHaveBeenCalled(); // still typing
    await act(async () => vi.advanceTimersByTime(350));
    await waitFor(() => expect(fetchMock).toHaveBeenCalledTimes(1));
    expect(String((fetchMock.mock.calls[0] as unknown[])[0])).toContain("q=wei");
    await waitFor(() => expect(result.current.results.data).toBeDefined());
  });
});

describe("useButler", () => {
  it("does not fetch until it has a name", async () => {
    const fetchMock = vi.fn(async () => ok({ name: "health" }));
    vi.stubGlobal("fetch", fetchMock);
    const { rerender, result } = renderHook(({ name }) => useButler(name), {
      wrapper: wrapper(),
      initialProps: { name: undefined as string | undefined },
    });
    expect(result.current.fetchStatus).toBe("idle");
    expect(fetchMock).not.toHaveBeenCalled();
    rerender({ name: "health" });
    await waitFor(() => expect(fetchMock).toHaveBeenCalledTimes(1));
    expect(String((fetchMock.mock.calls[0] as unknown[])[0])).toBe("/api/butlers/health");
  });
});

class FakeEventSource {
  static last: FakeEventSource | null = null;
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  private listeners = new Map<string, (event: MessageEvent<string>) => void>();
  constructor(readonly url: string) {
    FakeEventSource.last = this;
  }
  addEventListener(type: string, listener: (event: MessageEvent<string>) => void) {
    this.listeners.set(type, listener);
  }
  emit(type: string, data: unknown, id = "") {
    const event = new MessageEvent("message", { data: JSON.stringify(data), lastEventId: id });
    this.listeners.get(type)?.(event as MessageEvent<string>);
  }
  close() {}
}

describe("LiveEventsProvider", () => {
  it("makes every query stale on connecting until an event with an id has arrived", () => {
    vi.stubGlobal("EventSource", FakeEventSource);
    const client = new QueryClient();
    const invalidate = vi.spyOn(client, "invalidateQueries").mockResolvedValue();
    const { unmount } = renderHook(() => null, {
      wrapper: ({ children }: { children: ReactNode }) => (
        <QueryClientProvider client={client}>
          <LiveEventsProvider>{children}</LiveEventsProvider>
        </QueryClientProvider>
      ),
    });
    const source = FakeEventSource.last;
    expect(source?.url).toBe("/api/events");
    act(() => source?.emit("connected", { status: "ok" }));
    // A page's reads may predate the subscription: all of them are refreshed.
    expect(invalidate).toHaveBeenCalledTimes(1);
    expect(invalidate).toHaveBeenLastCalledWith();
    act(() => source?.emit("connected", { status: "ok" })); // reconnected, still no id
    expect(invalidate).toHaveBeenCalledTimes(2);
    act(() => source?.emit("feed_status", { mode: "listen" }, "41"));
    invalidate.mockClear();
    // A reconnect now sends Last-Event-ID: the server replays (or sends resync).
    act(() => source?.emit("connected", { status: "ok" }));
    expect(invalidate).not.toHaveBeenCalled();
    unmount();
  });
});
