import { type FormEvent, useState } from "react";

import { DataState, ErrorBox } from "../../components/DataState";
import { Pager } from "../../components/Pager";
import { useButlerState } from "../../hooks/useApi";
import { useDeleteState, useSetState } from "../../hooks/useMutations";
import { ago, json } from "../../lib/format";

const LIMIT = 50;

/** Parses the editor's text as JSON; a bare word that is not JSON is taken as a string. */
export function parseValue(text: string): { value: unknown } | { error: string } {
  const trimmed = text.trim();
  if (trimmed === "") return { error: "the value is empty: write JSON (null, 1, \"text\", {...})" };
  try {
    return { value: JSON.parse(trimmed) };
  } catch (e) {
    if (/^[[{"]/.test(trimmed) || /^-?\d/.test(trimmed)) {
      return { error: `not valid JSON: ${(e as Error).message}` };
    }
    return { value: text };
  }
}

function Editor({
  butler,
  initialKey = "",
  initialValue = "",
  fixedKey = false,
  onDone,
}: {
  butler: string;
  initialKey?: string;
  initialValue?: string;
  fixedKey?: boolean;
  onDone: () => void;
}) {
  const [key, setKey] = useState(initialKey);
  const [text, setText] = useState(initialValue);
  const [problem, setProblem] = useState<string | null>(null);
  const save = useSetState(butler);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!key) return setProblem("the key is empty");
    const parsed = parseValue(text);
    if ("error" in parsed) return setProblem(parsed.error);
    setProblem(null);
    save.mutate({ key, value: parsed.value }, { onSuccess: onDone });
  };
  return (
    <form className="editor" onSubmit={submit} aria-label={fixedKey ? `Edit ${key}` : "New state entry"}>
      <label className="field">
        <span>Key</span>
        <input value={key} onChange={(e) => setKey(e.target.value)} readOnly={fixedKey} required />
      </label>
      <label className="field wide">
        <span>Value (JSON)</span>
        <textarea value={text} onChange={(e) => setText(e.target.value)} rows={4} />
      </label>
      <button type="submit" disabled={save.isPending}>Save</button>
      <button type="button" onClick={onDone}>Cancel</button>
      {problem ? <p className="error-box" role="alert">{problem}</p> : null}
      {save.error ? <ErrorBox error={save.error} /> : null}
    </form>
  );
}

export function StatePanel({ butler }: { butler: string }) {
  const [prefix, setPrefix] = useState("");
  const [offset, setOffset] = useState(0);
  const [editing, setEditing] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const state = useButlerState(butler, { prefix, offset, limit: LIMIT });
  const remove = useDeleteState(butler);
  return (
    <div>
      <div className="toolbar">
        <label className="field">
          <span>Key prefix</span>
          <input value={prefix} onChange={(e) => { setPrefix(e.target.value); setOffset(0); }} />
        </label>
        <button type="button" onClick={() => setCreating(true)}>New entry</button>
      </div>
      {creating ? <Editor butler={butler} onDone={() => setCreating(false)} /> : null}
      {remove.error ? <ErrorBox error={remove.error} /> : null}
      <DataState loading={state.isLoading} error={state.error} empty={state.data?.data.length === 0} emptyText="No state entries.">
        <table className="table" aria-label="State entries">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Value</th>
              <th scope="col">Updated</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {state.data?.data.map((entry) => (
              <tr key={entry.key} data-key={entry.key}>
                <td className="mono">{entry.key}</td>
                <td>
                  {editing === entry.key ? (
                    <Editor butler={butler} initialKey={entry.key} initialValue={json(entry.value)} fixedKey onDone={() => setEditing(null)} />
                  ) : (
                    <pre>{json(entry.value)}</pre>
                  )}
                </td>
                <td>{ago(entry.updated_at)}</td>
                <td>
                  <button type="button" onClick={() => setEditing(entry.key)} aria-label={`Edit ${entry.key}`}>Edit</button>{" "}
                  <button
                    type="button"
                    onClick={() => {
                      if (window.confirm(`Delete state entry ${entry.key}?`)) remove.mutate(entry.key);
                    }}
                    aria-label={`Delete ${entry.key}`}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={LIMIT} total={state.data?.meta.total} hasMore={state.data?.meta.has_more ?? false} onChange={setOffset} label="state entries" />
      </DataState>
    </div>
  );
}
