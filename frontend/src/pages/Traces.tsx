import { useState } from "react";
import { Link } from "react-router-dom";

import { DataState, FailedButlers } from "../components/DataState";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/Status";
import { useTraces } from "../hooks/useApi";
import { ago, duration, money } from "../lib/format";

const LIMIT = 25;

export function TracesPage() {
  const [offset, setOffset] = useState(0);
  const traces = useTraces({ offset, limit: LIMIT });
  return (
    <section>
      <h1>Traces</h1>
      <p className="muted">One row per incoming message, followed across butlers.</p>
      <DataState loading={traces.isLoading} error={traces.error} empty={traces.data?.data.length === 0} emptyText="No traces yet: send a message.">
        <FailedButlers names={traces.data?.meta.failed_butlers} />
        <table className="table" aria-label="Traces">
          <thead>
            <tr>
              <th scope="col">Trace</th>
              <th scope="col">Message</th>
              <th scope="col">Status</th>
              <th scope="col">Butlers</th>
              <th scope="col">Sessions</th>
              <th scope="col">Started</th>
              <th scope="col">Duration</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {traces.data?.data.map((t) => (
              <tr key={t.trace_id}>
                <td>
                  <Link className="mono" to={`/traces/${encodeURIComponent(t.trace_id)}`} aria-label={`Trace ${t.trace_id.slice(0, 8)}`}>
                    {t.trace_id.slice(0, 8)}
                  </Link>
                </td>
                <td className="prompt">{t.message_preview}</td>
                <td><StatusBadge status={t.status} /></td>
                <td>{t.butlers.join(" → ")}</td>
                <td>{t.session_count}</td>
                <td>{ago(t.started_at)}</td>
                <td>{duration(t.duration_ms)}</td>
                <td>{money(t.cost_usd, t.unpriced_sessions)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={LIMIT} total={traces.data?.meta.total} hasMore={traces.data?.meta.has_more ?? false} onChange={setOffset} label="traces" />
      </DataState>
    </section>
  );
}
