import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { fireEvent, render, screen, waitFor } from "@testing-library/react";
import { MemoryRouter } from "react-router-dom";
import { afterEach, describe, expect, it, vi } from "vitest";

import type { ApprovalAction } from "../api/types";
import { PendingAction } from "../pages/Approvals";
import { parseValue } from "../pages/butler/StatePanel";
import { place } from "../pages/Trace";
import { StatusBadge } from "./Status";

afterEach(() => vi.unstubAllGlobals());

describe("StatusBadge", () => {
  it("says the status in words, not only in colour", () => {
    render(<StatusBadge status="down" />);
    const badge = screen.getByText("down");
    expect(badge.className).toContain("tone-bad");
    expect(badge.textContent).toContain("down");
  });
});

describe("PendingAction", () => {
  const action: ApprovalAction = {
    id: "a1",
    butler: "relationship",
    tool_name: "contact_update",
    tool_args: { email: null },
    status: "pending",
    requested_at: new Date(Date.now() - 5000).toISOString(),
    expires_at: new Date(Date.now() + 90_000).toISOString(),
    seconds_left: 90,
    session_id: "5d1c3a9e-0000-4000-8000-000000000001",
    requested_by: "session",
    client_session: null,
    decided_at: null,
    decided_by: null,
    reason: null,
  };

  it("approves with the reason given, through the API, with the CSRF header", async () => {
    const fetchMock = vi.fn(async () => new Response(JSON.stringify({ data: { ...action, status: "approved" }, meta: {} })));
    vi.stubGlobal("fetch", fetchMock);
    const client = new QueryClient();
    render(
      <QueryClientProvider client={client}>
        <MemoryRouter>
          <PendingAction action={action} now={Date.now()} />
        </MemoryRouter>
      </QueryClientProvider>,
    );
    expect(screen.getByLabelText(/Time left/).textContent).toMatch(/1 min \d+ s left/);
    fireEvent.change(screen.getByLabelText("Reason for contact_update on relationship"), {
      target: { value: "fine by me" },
    });
    fireEvent.click(screen.getByRole("button", { name: "Approve contact_update on relationship" }));
    await waitFor(() => expect(fetchMock).toHaveBeenCalledTimes(1));
    const [url, init] = fetchMock.mock.calls[0] as unknown as [string, RequestInit];
    expect(url).toBe("/api/approvals/actions/a1/approve");
    expect(init.method).toBe("POST");
    expect(init.body).toBe('{"reason":"fine by me"}');
    expect(new Headers(init.headers).get("X-Butlers-CSRF")).toBe("1");
  });
});

describe("state editor values", () => {
  it("reads JSON, keeps null, and refuses broken JSON with the reason", () => {
    expect(parseValue("null")).toEqual({ value: null });
    expect(parseValue('{"a": [1, "ü"]}')).toEqual({ value: { a: [1, "ü"] } });
    expect(parseValue("plain words")).toEqual({ value: "plain words" });
    expect("error" in parseValue("{broken")).toBe(true);
    expect("error" in parseValue("   ")).toBe(true);
  });
});

describe("trace waterfall", () => {
  it("places a span on the time axis", () => {
    const span = {
      id: "s",
      kind: "session" as const,
      name: "health",
      butler: "health",
      status: "completed",
      started_at: "2026-01-01T00:00:01Z",
      ended_at: "2026-01-01T00:00:02Z",
      duration_ms: 1000,
      children: [],
      attributes: {},
    };
    const [left, width] = place(span, Date.parse("2026-01-01T00:00:00Z"), 4000);
    expect(left).toBeCloseTo(25);
    expect(width).toBeCloseTo(25);
  });
});
