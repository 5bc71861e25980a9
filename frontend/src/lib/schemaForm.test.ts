import { describe, expect, it } from "vitest";

import { argumentsOf, FieldProblem, fieldsOf, textsOf } from "./schemaForm";

// As FastMCP writes a tool's input schema (pydantic): optionals are anyOf with null,
// Literal is an enum, nested models are $refs.
const SCHEMA = {
  type: "object",
  properties: {
    subject: { type: "string", description: "Who or what" },
    importance: { type: "number", default: 0.5 },
    limit: { anyOf: [{ type: "integer" }, { type: "null" }], default: null },
    permanence: { enum: ["permanent", "standard"], type: "string", default: "standard" },
    confirmed: { type: "boolean" },
    tags: { anyOf: [{ type: "array", items: { type: "string" } }, { type: "null" }] },
    place: { $ref: "#/$defs/Place" },
  },
  required: ["subject", "confirmed"],
  $defs: { Place: { type: "object", properties: { city: { type: "string" } } } },
};

describe("schema form", () => {
  const fields = fieldsOf(SCHEMA);

  it("gives each property the input its type asks for", () => {
    expect(fields.map((f) => [f.name, f.kind, f.required])).toEqual([
      ["subject", "string", true],
      ["importance", "number", false],
      ["limit", "integer", false],
      ["permanence", "enum", false],
      ["confirmed", "boolean", true],
      ["tags", "json", false],
      ["place", "json", false],
    ]);
    expect(fields[3].options).toEqual(['"permanent"', '"standard"']);
    expect(fields[1].placeholder).toBe("0.5");
    expect(fields[0].description).toBe("Who or what");
  });

  it("turns the fields' text into typed arguments, leaving empty ones out", () => {
    const args = argumentsOf(fields, {
      subject: "bike",
      importance: "0.9",
      limit: "",
      permanence: '"permanent"',
      confirmed: "false",
      tags: '["a", "b"]',
      place: '{"city": "Bern"}',
    });
    expect(args).toEqual({
      subject: "bike",
      importance: 0.9,
      permanence: "permanent",
      confirmed: false,
      tags: ["a", "b"],
      place: { city: "Bern" },
    });
    expect(argumentsOf(fields, textsOf(fields, args))).toEqual(args);
  });

  it("names the field to fix", () => {
    expect(() => argumentsOf(fields, { confirmed: "true" })).toThrow(new FieldProblem("subject is required"));
    expect(() => argumentsOf(fields, { subject: "x", confirmed: "true", limit: "2.5" })).toThrow("limit must be a whole number");
    expect(() => argumentsOf(fields, { subject: "x", confirmed: "true", tags: "[oops" })).toThrow(/tags is not valid JSON/);
  });
});
