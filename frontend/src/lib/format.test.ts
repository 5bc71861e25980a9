import { describe, expect, it } from "vitest";

import { ago, countdown, duration, money } from "./format";

describe("format", () => {
  it("never shows an unknown cost as $0", () => {
    expect(money(null)).toBe("—");
    expect(money(null, 3)).toBe("unpriced");
    expect(money(1.5, 2)).toBe("$1.50 + 2 unpriced");
    expect(money(0.0012)).toBe("$0.0012");
  });

  it("formats durations and countdowns", () => {
    expect(duration(250)).toBe("250 ms");
    expect(duration(1500)).toBe("1.50 s");
    expect(duration(125_000)).toBe("2 min 5 s");
    expect(countdown(0)).toBe("expired");
    expect(countdown(75)).toBe("1 min 15 s left");
    expect(countdown(null)).toBe("no deadline");
  });

  it("says how long ago, and in how long", () => {
    const now = Date.parse("2026-01-01T12:00:00Z");
    expect(ago("2026-01-01T11:58:00Z", now)).toBe("2 min ago");
    expect(ago("2026-01-01T15:00:00Z", now)).toBe("in 3 h");
    expect(ago(null, now)).toBe("never");
  });
});
