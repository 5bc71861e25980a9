import { type FormEvent, useMemo, useState } from "react";
import { Link } from "react-router-dom";

import type { ToolInfo } from "../../api/types";
import { DataState, ErrorBox } from "../../components/DataState";
import { Markdown } from "../../components/Markdown";
import { useApprovalActions, useButlerTools } from "../../hooks/useApi";
import { useCallTool } from "../../hooks/useMutations";
import { json } from "../../lib/format";
import { argumentsOf, type Field, FieldProblem, fieldsOf, textsOf } from "../../lib/schemaForm";
import { approvalAnchor } from "../Approvals";

/** While a call runs: whether it is held for the owner's approval, with a link to it. */
function HeldNotice({ butler, tool, since }: { butler: string; tool: string; since: number }) {
  const pending = useApprovalActions({ butler, limit: 100 }, 1000);
  // The newest approval this dashboard's form asked for, for this tool, since the call
  // started (a minute of slack for the clocks of the browser and the database).
  const held = (pending.data?.data ?? [])
    .filter((a) => a.tool_name === tool && a.requested_by === "dashboard" && Date.parse(a.requested_at) >= since - 60_000)
    .sort((a, b) => Date.parse(b.requested_at) - Date.parse(a.requested_at))[0];
  if (!held) {
    return <p role="status" aria-label={`Progress of ${tool}`}>Calling {tool}…</p>;
  }
  return (
    <p role="status" aria-label={`Progress of ${tool}`} className="warn-box" data-approval={held.id}>
      Waiting for approval: {tool} is held until the owner decides.{" "}
      <Link to={`/approvals#${approvalAnchor(held.id)}`}>Open approval {held.id.slice(0, 8)}</Link>
    </p>
  );
}

function FieldInput({ tool, field, value, onChange }: { tool: string; field: Field; value: string; onChange: (text: string) => void }) {
  const label = `${field.name}${field.required ? " (required)" : ""}`;
  const hint = field.description ? <small className="muted">{field.description}</small> : null;
  let input;
  if (field.kind === "enum" || field.kind === "boolean") {
    const options = field.kind === "boolean" ? ["true", "false"] : field.options;
    input = (
      <select value={value} onChange={(e) => onChange(e.target.value)} aria-label={`${field.name} of ${tool}`}>
        <option value="">{field.placeholder ? `default (${field.placeholder})` : "—"}</option>
        {options.map((o) => (
          <option key={o} value={o}>
            {field.kind === "enum" && o.startsWith('"') ? JSON.parse(o) : o}
          </option>
        ))}
      </select>
    );
  } else if (field.kind === "json") {
    input = <textarea value={value} rows={2} placeholder={field.placeholder || "JSON"} onChange={(e) => onChange(e.target.value)} aria-label={`${field.name} of ${tool} (JSON)`} />;
  } else {
    const numeric = field.kind === "number" || field.kind === "integer";
    input = (
      <input
        type={numeric ? "number" : "text"}
        step={field.kind === "integer" ? 1 : numeric ? "any" : undefined}
        value={value}
        placeholder={field.placeholder}
        onChange={(e) => onChange(e.target.value)}
        aria-label={`${field.name} of ${tool}`}
      />
    );
  }
  return (
    <label className="field" data-field={field.name} data-kind={field.kind}>
      <span>{label}</span>
      {input}
      {hint}
    </label>
  );
}

function CallForm({ butler, tool }: { butler: string; tool: ToolInfo }) {
  const fields = useMemo(() => fieldsOf(tool.input_schema), [tool.input_schema]);
  const [jsonMode, setJsonMode] = useState(false);
  const [texts, setTexts] = useState<Record<string, string>>({});
  const [text, setText] = useState("{}");
  const [problem, setProblem] = useState<string | null>(null);
  const [since, setSince] = useState(0);
  const call = useCallTool(butler);
  const parsed = (): Record<string, unknown> => {
    if (!jsonMode) return argumentsOf(fields, texts);
    let args: unknown;
    try {
      args = JSON.parse(text);
    } catch (err) {
      throw new FieldProblem(`arguments are not valid JSON: ${(err as Error).message}`);
    }
    if (!args || typeof args !== "object" || Array.isArray(args)) throw new FieldProblem("arguments must be a JSON object");
    return args as Record<string, unknown>;
  };
  const toggle = () => {
    try {
      const args = parsed();
      if (jsonMode) setTexts(textsOf(fields, args));
      else setText(JSON.stringify(args, null, 2));
      setProblem(null);
      setJsonMode(!jsonMode);
    } catch (err) {
      setProblem((err as Error).message);
    }
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    let args: Record<string, unknown>;
    try {
      args = parsed();
    } catch (err) {
      return setProblem((err as Error).message);
    }
    setProblem(null);
    setSince(Date.now());
    call.mutate({ tool: tool.name, args });
  };
  const result = call.data?.data;
  return (
    <form className="editor" onSubmit={submit} aria-label={`Call ${tool.name}`}>
      <label className="toggle">
        <input type="checkbox" checked={jsonMode} onChange={toggle} aria-label={`Edit the arguments of ${tool.name} as JSON`} /> JSON
      </label>
      {jsonMode ? (
        <label className="field wide">
          <span>Arguments of {tool.name} (JSON object)</span>
          <textarea value={text} onChange={(e) => setText(e.target.value)} rows={4} />
        </label>
      ) : fields.length ? (
        <fieldset className="schema-form" aria-label={`Arguments of ${tool.name}`}>
          {fields.map((f) => (
            <FieldInput key={f.name} tool={tool.name} field={f} value={texts[f.name] ?? ""} onChange={(v) => setTexts({ ...texts, [f.name]: v })} />
          ))}
        </fieldset>
      ) : (
        <p className="muted">{tool.name} takes no arguments.</p>
      )}
      <button type="submit" disabled={call.isPending}>Call {tool.name}</button>
      {problem ? <p className="error-box" role="alert">{problem}</p> : null}
      {call.isPending ? <HeldNotice butler={butler} tool={tool.name} since={since} /> : null}
      {call.error ? <ErrorBox error={call.error} /> : null}
      {result && !call.isPending ? (
        <div role="status" aria-label={`Result of ${tool.name}`}>
          <p>{result.is_error ? "The tool reported an error:" : "Result:"}</p>
          <pre className={result.is_error ? "error-box" : ""}>{result.result !== null && result.result !== undefined ? json(result.result) : result.raw_text}</pre>
        </div>
      ) : null}
    </form>
  );
}

export function ToolsPanel({ butler }: { butler: string }) {
  const tools = useButlerTools(butler);
  const [open, setOpen] = useState<string | null>(null);
  return (
    <DataState loading={tools.isLoading} error={tools.error} empty={tools.data?.data.length === 0}>
      <ul className="tools" aria-label="Tools">
        {tools.data?.data.map((t) => (
          <li key={t.name} data-tool={t.name}>
            <header>
              <strong className="mono">{t.name}</strong> <span className="muted">{t.module ?? "core"}</span>
              {t.approval_mode && t.approval_mode !== "never" ? <span className="chip">approval: {t.approval_mode}</span> : null}
            </header>
            {t.description ? <Markdown text={t.description} className="description" /> : null}
            <details>
              <summary>Input schema</summary>
              <pre>{json(t.input_schema)}</pre>
            </details>
            <button type="button" onClick={() => setOpen(open === t.name ? null : t.name)} aria-expanded={open === t.name} aria-label={`Try ${t.name}`}>
              Try it
            </button>
            {open === t.name ? <CallForm butler={butler} tool={t} /> : null}
          </li>
        ))}
      </ul>
    </DataState>
  );
}
