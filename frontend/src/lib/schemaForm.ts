/** A tool's JSON schema as form fields, and the fields' text back as call arguments. */

export type FieldKind = "string" | "number" | "integer" | "boolean" | "enum" | "json";

export interface Field {
  name: string;
  kind: FieldKind;
  required: boolean;
  description: string;
  /** For `enum`: each value as JSON text (the select's option values). */
  options: string[];
  /** The schema's default, as the field's text ("" when none). */
  placeholder: string;
}

type Schema = Record<string, unknown>;

function isObject(value: unknown): value is Schema {
  return !!value && typeof value === "object" && !Array.isArray(value);
}

/** `{"$ref": "#/$defs/X"}` resolved against the tool's schema (one level, as tools use). */
function resolve(schema: Schema, root: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/")) return schema;
  let node: unknown = root;
  for (const part of ref.slice(2).split("/")) node = isObject(node) ? node[part] : undefined;
  return isObject(node) ? { ...node, ...schema, $ref: undefined } : schema;
}

/** An optional value is `anyOf: [X, {type: null}]`: its field is X's. */
function nonNull(schema: Schema, root: Schema): Schema {
  const resolved = resolve(schema, root);
  const choices = resolved.anyOf ?? resolved.oneOf;
  if (Array.isArray(choices)) {
    const real = choices.filter((c) => isObject(c) && c.type !== "null") as Schema[];
    if (real.length === 1) return { ...resolved, ...resolve(real[0], root), anyOf: undefined, oneOf: undefined };
  }
  return resolved;
}

function kindOf(schema: Schema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.length) return "enum";
  if ("const" in schema) return "enum";
  const type = Array.isArray(schema.type) ? schema.type.filter((t) => t !== "null") : [schema.type];
  if (type.length !== 1) return "json";
  if (type[0] === "string" || type[0] === "number" || type[0] === "integer" || type[0] === "boolean") return type[0];
  return "json";
}

export function fieldsOf(schema: Record<string, unknown>): Field[] {
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  return Object.entries(properties).map(([name, raw]) => {
    const prop = nonNull(isObject(raw) ? raw : {}, schema);
    const kind = kindOf(prop);
    const values = Array.isArray(prop.enum) ? prop.enum : "const" in prop ? [prop.const] : [];
    const fallback = prop.default ?? (isObject(raw) ? raw.default : undefined);
    return {
      name,
      kind,
      required: required.has(name),
      description: typeof prop.description === "string" ? prop.description : "",
      options: values.map((v) => JSON.stringify(v)),
      placeholder: fallback === undefined || fallback === null ? "" : textOf(kind, fallback),
    };
  });
}

/** A value as its field's text (a string as is, anything else as JSON). */
export function textOf(kind: FieldKind, value: unknown): string {
  if (kind === "string" && typeof value === "string") return value;
  if (kind === "number" || kind === "integer" || kind === "boolean") return String(value);
  return JSON.stringify(value, null, kind === "json" ? 2 : undefined);
}

/** The fields' text from arguments (switching from JSON mode to the form). */
export function textsOf(fields: Field[], args: Record<string, unknown>): Record<string, string> {
  const texts: Record<string, string> = {};
  for (const field of fields) {
    if (field.name in args && args[field.name] !== undefined) texts[field.name] = textOf(field.kind, args[field.name]);
  }
  return texts;
}

export class FieldProblem extends Error {}

/** The call's arguments from the fields' text; an empty field is left out (the tool's
 *  default applies). Throws `FieldProblem` naming the field to fix. */
export function argumentsOf(fields: Field[], texts: Record<string, string>): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const field of fields) {
    const text = texts[field.name] ?? "";
    if (text.trim() === "") {
      if (field.required) throw new FieldProblem(`${field.name} is required`);
      continue;
    }
    switch (field.kind) {
      case "string":
        args[field.name] = text;
        break;
      case "number":
      case "integer": {
        const value = Number(text);
        if (!Number.isFinite(value)) throw new FieldProblem(`${field.name} must be a number, not ${JSON.stringify(text)}`);
        if (field.kind === "integer" && !Number.isInteger(value)) throw new FieldProblem(`${field.name} must be a whole number`);
        args[field.name] = value;
        break;
      }
      case "boolean":
        args[field.name] = text === "true";
        break;
      case "enum":
        args[field.name] = JSON.parse(text);
        break;
      default:
        try {
          args[field.name] = JSON.parse(text);
        } catch (err) {
          throw new FieldProblem(`${field.name} is not valid JSON: ${(err as Error).message}`);
        }
    }
  }
  return args;
}
