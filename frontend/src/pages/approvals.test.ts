import { describe, expect, it } from "vitest";

import { expiredCount } from "./Approvals";

describe("expiredCount", () => {
  it("counts the requests expired across butlers", () => {
    expect(expiredCount({ relationship: ["a", "b"], health: ["c"] })).toBe(3);
    expect(expiredCount({})).toBe(0);
  });
});
