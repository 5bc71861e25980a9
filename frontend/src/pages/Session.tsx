import { Link, useParams } from "react-router-dom";

import type { LlmCallInfo, SessionDetail, ToolCallRecord } from "../api/types";
import { DataState, ErrorBox } from "../components/DataState";
import { StatusBadge } from "../components/Status";
import { useSession } from "../hooks/useApi";
import { useCancelSession } from "../hooks/useMutations";
import { duration, json, money, tokens, when } from "../lib/format";

function ToolTimeline({ session }: { session: SessionDetail }) {
  const calls = session.tool_calls;
  if (!calls.length) return <p className="muted">This session called no tools.</p>;
  const start = Date.parse(session.started_at);
  return (
    <ol className="tool-timeline" aria-label="Tool calls">
      {calls.map((call: ToolCallRecord, i) => {
        const offset = call.started_at ? Date.parse(call.started_at) - start : null;
        return (
          <li key={i} className={call.is_error ? "tool tool-error" : "tool tool-ok"} data-tool={call.name}>
            <header>
              <StatusBadge status={call.is_error ? "error" : "ok"} label={call.is_error ? "failed" : "ok"} />{" "}
              <strong className="mono">{call.name}</strong>{" "}
              <span className="muted">
                {offset !== null ? `at +${duration(offset)}` : ""} {call.duration_ms != null ? `took ${duration(call.duration_ms)}` : ""}
              </span>
            </header>
            <details>
              <summary>Arguments and result</summary>
              <h4>Arguments (sensitive values redacted)</h4>
              <pre>{json(call.arguments)}</pre>
              <h4>Result</h4>
              <pre>{json(call.result)}</pre>
            </details>
          </li>
        );
      })}
    </ol>
  );
}

/** " (N cached, M written to the cache)": what of the input the provider's prompt cache served. */
function cacheNote(read: number | null, written: number | null): string {
  const parts = [read ? `${tokens(read)} cached` : "", written ? `${tokens(written)} written to the cache` : ""].filter(Boolean);
  return parts.length ? ` (${parts.join(", ")})` : "";
}

function LlmCalls({ session }: { session: SessionDetail }) {
  const calls = session.llm_calls;
  if (!calls.length) {
    return <p className="muted">{session.llm_call_count === null ? "Model calls were not recorded for this session." : "No model call recorded."}</p>;
  }
  return (
    <ol className="llm-calls" aria-label="Model calls">
      {calls.map((call: LlmCallInfo) => (
        <li key={call.seq} className={call.error ? "tool tool-error" : "tool tool-ok"} data-llm-call={call.seq}>
          <header>
            <StatusBadge status={call.error ? "error" : "ok"} label={call.error ? "failed" : "ok"} />{" "}
            <strong>Call {call.seq + 1}</strong> <span className="mono">{call.model ?? "—"}</span>{" "}
            <span className="muted">
              at {when(call.started_at)}, took {duration(call.duration_ms)}; {tokens(call.input_tokens)} in
              {cacheNote(call.cached_tokens, call.cache_write_tokens)} / {tokens(call.output_tokens)} out
              {call.cost_usd != null ? `, ${money(call.cost_usd)}` : ""}
            </span>
          </header>
          {call.error ? <pre className="error-box">{call.error}</pre> : null}
          <details>
            <summary>Request and response</summary>
            <h4>Sent (new messages since the previous call; secrets redacted)</h4>
            <pre>{json(call.request)}</pre>
            <h4>Reply</h4>
            <pre>{json(call.response)}</pre>
          </details>
        </li>
      ))}
    </ol>
  );
}

function CancelButton({ butler, id }: { butler: string; id: string }) {
  const cancel = useCancelSession(butler, id);
  return (
    <p>
      <button
        type="button"
        className="deny"
        disabled={cancel.isPending}
        onClick={() => {
          if (window.confirm("Stop this session? Its work in progress is abandoned.")) cancel.mutate();
        }}
      >
        {cancel.isPending ? "Cancelling…" : "Cancel session"}
      </button>
      {cancel.error ? <ErrorBox error={cancel.error} /> : null}
    </p>
  );
}

export function SessionPage() {
  const { name, id } = useParams();
  const session = useSession(name, id);
  const s = session.data?.data;
  return (
    <section>
      <p>
        <Link to={`/butlers/${encodeURIComponent(name ?? "")}`}>← {name}</Link>
      </p>
      <h1>Session {id?.slice(0, 8)}</h1>
      <DataState loading={session.isLoading} error={session.error}>
        {s ? (
          <>
            {s.status === "running" ? <CancelButton butler={s.butler} id={s.id} /> : null}
            <dl className="facts">
              <div><dt>Butler</dt><dd>{s.butler}</dd></div>
              <div><dt>Status</dt><dd><StatusBadge status={s.status} /></dd></div>
              <div><dt>Trigger</dt><dd>{s.trigger_source}</dd></div>
              <div><dt>Started</dt><dd>{when(s.started_at)}</dd></div>
              <div><dt>Duration</dt><dd>{duration(s.duration_ms)}</dd></div>
              <div><dt>Model</dt><dd>{s.model ?? "—"}</dd></div>
              <div><dt>Tokens</dt><dd>{tokens(s.input_tokens)} in{cacheNote(s.cached_tokens, s.cache_write_tokens)} / {tokens(s.output_tokens)} out</dd></div>
              <div><dt>Model calls</dt><dd>{s.llm_call_count ?? "—"}</dd></div>
              <div><dt>Cost</dt><dd>{s.priced ? money(s.cost_usd) : "unpriced (no price for this model)"}</dd></div>
              <div>
                <dt>Trace</dt>
                <dd>
                  {s.trace_id ? (
                    <Link to={`/traces/${encodeURIComponent(s.trace_id)}`} className="mono">
                      {s.trace_id}
                    </Link>
                  ) : (
                    "—"
                  )}
                </dd>
              </div>
            </dl>
            <h2>Prompt</h2>
            <pre className="prompt-block">{s.prompt}</pre>
            {s.error ? (
              <>
                <h2>Error</h2>
                <pre className="error-box">{s.error}</pre>
              </>
            ) : null}
            <h2>Output</h2>
            <pre className="prompt-block">{s.output ?? "(none)"}</pre>
            <h2>Tool calls ({s.tool_call_count})</h2>
            <ToolTimeline session={s} />
            <h2>Model calls ({s.llm_calls.length})</h2>
            <LlmCalls session={s} />
            {s.approvals.length ? (
              <>
                <h2>Approvals</h2>
                <ul>
                  {s.approvals.map((a) => (
                    <li key={a.id}>
                      <span className="mono">{a.tool_name}</span> <StatusBadge status={a.status} />{" "}
                      {a.decided_by ? `by ${a.decided_by}` : ""} {a.reason ? `: ${a.reason}` : ""}
                    </li>
                  ))}
                </ul>
              </>
            ) : null}
          </>
        ) : null}
      </DataState>
    </section>
  );
}
