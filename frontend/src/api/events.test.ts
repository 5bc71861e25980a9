import { describe, expect, it } from "vitest";

import { describe as describeEvent, keysFor } from "./events";
import { approvalKeys, overviewKeys, scheduleKeys, sessionKeys } from "./keys";

describe("keysFor", () => {
  it("a decided approval makes every approval query and the overview stale", () => {
    const keys = keysFor("approval_decided", { butler: "health", status: "approved" });
    expect(keys).toContainEqual(approvalKeys.all);
    expect(keys).toContainEqual(overviewKeys.all);
  });

  it("a finished session makes the session lists stale", () => {
    expect(keysFor("session_end", { butler: "general" })).toContainEqual(sessionKeys.all);
  });

  it("a schedule change is scoped to its butler", () => {
    expect(keysFor("schedule_changed", { butler: "general" })).toContainEqual(scheduleKeys.list("general"));
  });

  it("resync reloads everything; connected reloads nothing", () => {
    expect(keysFor("resync", {})).toBe("all");
    expect(keysFor("connected", {})).toEqual([]);
  });
});

describe("describe", () => {
  it("says which butler went down and why", () => {
    const text = describeEvent({
      id: "1",
      type: "butler_status",
      data: { butler: "health", status: "down", reason: "connection refused" },
      receivedAt: 0,
    });
    expect(text).toBe("health is down: connection refused");
  });
});
