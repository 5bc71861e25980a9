import { describe, expect, it } from "vitest";

import type { LiveEvent } from "../api/events";
import type { TimelineEvent } from "../api/types";
import { mergeFeed } from "./ActivityFeed";

const live = (type: LiveEvent["type"], data: Record<string, unknown>, at: number): LiveEvent => ({
  id: `${at}`,
  type,
  data,
  receivedAt: at,
});

describe("mergeFeed", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  const recorded: TimelineEvent[] = [
    { at: "2026-01-01T11:59:59Z", butler: "health", kind: "session_start", ref: "s1", summary: "route", status: "running" },
  ];

  it("shows an event once when both the stream and the timeline have it", () => {
    const events = [
      live("session_end", { butler: "health", session_id: "s1", status: "completed" }, now),
      live("session_start", { butler: "health", session_id: "s1" }, now - 1000),
    ];
    const feed = mergeFeed(recorded, events);
    expect(feed.map((e) => e.key)).toEqual(["session_end:s1", "session_start:s1"]);
    expect(feed[1].source).toBe("recorded");
  });

  it("keeps live-only events and one line per message", () => {
    const events = [
      live("message_done", { request_id: "r1", status: "completed" }, now),
      live("message_accepted", { request_id: "r1", channel: "telegram" }, now - 2000),
      live("butler_status", { butler: "general", status: "down" }, now - 3000),
    ];
    const feed = mergeFeed([], events);
    expect(feed.map((e) => e.kind)).toEqual(["message_received", "butler_status"]);
    expect(feed[1].text).toContain("general is down");
  });
});
