import { type FormEvent, useState } from "react";

import type { ToolInfo } from "../../api/types";
import { DataState, ErrorBox } from "../../components/DataState";
import { Markdown } from "../../components/Markdown";
import { useButlerTools } from "../../hooks/useApi";
import { useCallTool } from "../../hooks/useMutations";
import { json } from "../../lib/format";

function CallForm({ butler, tool }: { butler: string; tool: ToolInfo }) {
  const [text, setText] = useState("{}");
  const [problem, setProblem] = useState<string | null>(null);
  const call = useCallTool(butler);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    let args: unknown;
    try {
      args = JSON.parse(text);
    } catch (err) {
      return setProblem(`arguments are not valid JSON: ${(err as Error).message}`);
    }
    if (!args || typeof args !== "object" || Array.isArray(args)) {
      return setProblem("arguments must be a JSON object");
    }
    setProblem(null);
    call.mutate({ tool: tool.name, args: args as Record<string, unknown> });
  };
  const result = call.data?.data;
  return (
    <form className="editor" onSubmit={submit} aria-label={`Call ${tool.name}`}>
      <label className="field wide">
        <span>Arguments of {tool.name} (JSON object)</span>
        <textarea value={text} onChange={(e) => setText(e.target.value)} rows={3} />
      </label>
      <button type="submit" disabled={call.isPending}>Call {tool.name}</button>
      {problem ? <p className="error-box" role="alert">{problem}</p> : null}
      {call.error ? <ErrorBox error={call.error} /> : null}
      {result ? (
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
