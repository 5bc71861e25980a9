import { Link, useParams } from "react-router-dom";

import type { TraceSpan } from "../api/types";
import { DataState } from "../components/DataState";
import { StatusBadge } from "../components/Status";
import { sessionPath } from "../components/SessionTable";
import { useTraceDetail } from "../hooks/useApi";
import { duration, money, when } from "../lib/format";

interface Row {
  span: TraceSpan;
  depth: number;
}

export function flatten(spans: TraceSpan[], depth = 0, out: Row[] = []): Row[] {
  for (const span of spans) {
    out.push({ span, depth });
    flatten(span.children, depth + 1, out);
  }
  return out;
}

/** Where a span sits on the trace's time axis, as percentages (left, width). */
export function place(span: TraceSpan, start: number, total: number): [number, number] {
  if (!span.started_at || total <= 0) return [0, 0];
  const left = ((Date.parse(span.started_at) - start) / total) * 100;
  const end = span.ended_at ? Date.parse(span.ended_at) : Date.parse(span.started_at) + (span.duration_ms ?? 0);
  const width = Math.max(0.5, ((end - Date.parse(span.started_at)) / total) * 100);
  return [Math.min(Math.max(left, 0), 99.5), Math.min(width, 100 - Math.max(left, 0))];
}

function SpanLabel({ span }: { span: TraceSpan }) {
  const sessionId = span.kind === "session" ? span.id : null;
  const text = `${span.kind}: ${span.name}`;
  if (sessionId && span.butler) {
    return <Link to={sessionPath({ butler: span.butler, id: sessionId })}>{text}</Link>;
  }
  return <span>{text}</span>;
}

export function TracePage() {
  const { id } = useParams();
  const trace = useTraceDetail(id);
  const t = trace.data?.data;
  const rows = t ? flatten(t.spans) : [];
  const starts = rows.map((r) => r.span.started_at).filter((s): s is string => !!s).map(Date.parse);
  const ends = rows
    .map((r) => (r.span.ended_at ? Date.parse(r.span.ended_at) : r.span.started_at ? Date.parse(r.span.started_at) + (r.span.duration_ms ?? 0) : NaN))
    .filter((n) => !Number.isNaN(n));
  const start = starts.length ? Math.min(...starts) : 0;
  const total = ends.length ? Math.max(...ends) - start : 0;
  return (
    <section>
      <p>
        <Link to="/traces">← Traces</Link>
      </p>
      <h1>Trace {id?.slice(0, 8)}</h1>
      <DataState loading={trace.isLoading} error={trace.error}>
        {t ? (
          <>
            <dl className="facts">
              <div><dt>Status</dt><dd><StatusBadge status={t.status} /></dd></div>
              <div><dt>Butlers</dt><dd>{t.butlers.join(" → ")}</dd></div>
              <div><dt>Started</dt><dd>{when(t.started_at)}</dd></div>
              <div><dt>Duration</dt><dd>{duration(t.duration_ms)}</dd></div>
              <div><dt>Sessions</dt><dd>{t.session_count}</dd></div>
              <div><dt>Tool calls</dt><dd>{t.tool_call_count}</dd></div>
              <div><dt>Cost (sum)</dt><dd>{money(t.cost_usd, t.unpriced_sessions)}</dd></div>
              <div><dt>Request</dt><dd className="mono">{t.request_id ?? "—"}</dd></div>
            </dl>
            {t.failed_butlers.length ? (
              <p className="warn-box">Not read (unreachable): {t.failed_butlers.join(", ")}</p>
            ) : null}
            <table className="waterfall" aria-label="Trace waterfall">
              <thead>
                <tr>
                  <th scope="col">Step</th>
                  <th scope="col">Butler</th>
                  <th scope="col">Status</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Timeline</th>
                </tr>
              </thead>
              <tbody>
                {rows.map(({ span, depth }) => {
                  const [left, width] = place(span, start, total);
                  return (
                    <tr key={`${span.kind}-${span.id}`} data-kind={span.kind} data-butler={span.butler ?? ""}>
                      <td style={{ paddingLeft: `${0.5 + depth * 1.25}rem` }}>
                        <SpanLabel span={span} />
                      </td>
                      <td>{span.butler ?? "—"}</td>
                      <td><StatusBadge status={span.status} /></td>
                      <td>{duration(span.duration_ms)}</td>
                      <td className="bar-cell">
                        <span
                          className={`bar kind-${span.kind}`}
                          style={{ left: `${left}%`, width: `${width}%` }}
                          title={`${span.name}: ${duration(span.duration_ms)}`}
                        />
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </>
        ) : null}
      </DataState>
    </section>
  );
}
