import { AUDIT_OUTCOMES } from "../api/enums";
import { DataState } from "../components/DataState";
import { RangeSelect, Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/Status";
import { useAuditLog, useButlers } from "../hooks/useApi";
import { TIME_RANGES, offsetOf, oneOf, sinceOf, useUrlState } from "../hooks/useUrlState";
import { duration, json, when } from "../lib/format";

const LIMIT = 50;
const FILTERS = { butler: "", status: "", range: "", offset: "0" };

export function AuditPage() {
  const [url, setUrl] = useUrlState(FILTERS);
  const status = oneOf(url.status, AUDIT_OUTCOMES);
  const range = oneOf(url.range, TIME_RANGES);
  const offset = offsetOf(url.offset);
  const butlers = useButlers();
  const audit = useAuditLog({ butler: url.butler, status: status || undefined, since: sinceOf(range), offset, limit: LIMIT });
  return (
    <section>
      <h1>Audit log</h1>
      <p className="muted">Every write made through the dashboard, who made it and what came of it.</p>
      <div className="toolbar">
        <Select label="Butler" value={url.butler} options={(butlers.data?.data ?? []).map((b) => b.name)} onChange={(butler) => setUrl({ butler })} />
        <Select label="Outcome" value={status} options={AUDIT_OUTCOMES} onChange={(s) => setUrl({ status: s })} />
        <RangeSelect value={range} onChange={(r) => setUrl({ range: r })} />
      </div>
      <DataState loading={audit.isLoading} error={audit.error} empty={audit.data?.data.length === 0} emptyText="No writes yet.">
        <table className="table" aria-label="Audit log">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Actor</th>
              <th scope="col">Operation</th>
              <th scope="col">Butler</th>
              <th scope="col">Target</th>
              <th scope="col">Outcome</th>
              <th scope="col">Took</th>
              <th scope="col">Request</th>
            </tr>
          </thead>
          <tbody>
            {audit.data?.data.map((a) => (
              <tr key={a.id}>
                <td>{when(a.at)}</td>
                <td>{a.actor}</td>
                <td className="mono">{a.operation}</td>
                <td>{a.butler ?? "—"}</td>
                <td className="mono">{a.target ?? "—"}</td>
                <td>
                  <StatusBadge status={a.status} />
                  {a.error ? <span className="muted"> {a.error}</span> : null}
                </td>
                <td>{duration(a.duration_ms)}</td>
                <td>
                  <details>
                    <summary>Show</summary>
                    <pre>{json(a.request)}</pre>
                  </details>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={LIMIT} total={audit.data?.meta.total} hasMore={audit.data?.meta.has_more ?? false} onChange={(o) => setUrl({ offset: String(o) })} label="audit entries" />
      </DataState>
    </section>
  );
}
