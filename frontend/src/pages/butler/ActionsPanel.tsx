import { type FormEvent, useState } from "react";
import { Link } from "react-router-dom";

import { ErrorBox } from "../../components/DataState";
import { StatusBadge } from "../../components/Status";
import { sessionPath } from "../../components/SessionTable";
import { useTick, useTrigger } from "../../hooks/useMutations";
import { duration, money } from "../../lib/format";

export function ActionsPanel({ butler }: { butler: string }) {
  const [prompt, setPrompt] = useState("");
  const trigger = useTrigger(butler);
  const tick = useTick(butler);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (prompt.trim()) trigger.mutate({ prompt });
  };
  const result = trigger.data?.data;
  return (
    <div className="actions">
      <form onSubmit={submit} aria-label={`Trigger ${butler}`}>
        <label className="field wide">
          <span>Prompt for a new session of {butler}</span>
          <textarea value={prompt} onChange={(e) => setPrompt(e.target.value)} rows={3} required />
        </label>
        <button type="submit" disabled={trigger.isPending}>{trigger.isPending ? "Running…" : "Trigger"}</button>
      </form>
      {trigger.error ? <ErrorBox error={trigger.error} /> : null}
      {result ? (
        <div role="status" aria-label="Trigger result">
          <StatusBadge status={result.success ? "success" : "failed"} />{" "}
          <Link to={sessionPath({ butler, id: result.session_id })}>session {result.session_id.slice(0, 8)}</Link> ·{" "}
          {duration(result.duration_ms)} · {money(result.cost_usd)}
          <pre>{result.output ?? result.error ?? ""}</pre>
        </div>
      ) : null}
      <p>
        <button type="button" onClick={() => tick.mutate()} disabled={tick.isPending}>
          Tick (run due schedules now)
        </button>{" "}
        {tick.data ? <span role="status">{tick.data.data.ran.length ? `Ran ${tick.data.data.ran.length}: ${tick.data.data.ran.map((r) => String(r.name ?? JSON.stringify(r))).join(", ")}` : "Nothing was due."}</span> : null}
      </p>
      {tick.error ? <ErrorBox error={tick.error} /> : null}
    </div>
  );
}
