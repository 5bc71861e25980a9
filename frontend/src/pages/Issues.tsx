import { Link } from "react-router-dom";

import { DataState } from "../components/DataState";
import { StatusBadge } from "../components/Status";
import { useIssues } from "../hooks/useApi";
import { ago } from "../lib/format";

const SEVERITY: Record<string, string> = { critical: "error", warning: "warning", info: "pending" };

export function IssuesPage() {
  const issues = useIssues();
  return (
    <section>
      <h1>Issues</h1>
      <DataState loading={issues.isLoading} error={issues.error} empty={issues.data?.data.length === 0} emptyText="No issues: every butler is healthy.">
        <ul className="issues" aria-label="Issues">
          {issues.data?.data.map((i) => (
            <li key={i.id} className={`issue severity-${i.severity}`}>
              <header>
                <StatusBadge status={SEVERITY[i.severity] ?? "pending"} label={i.severity} />{" "}
                <strong>{i.title}</strong>{" "}
                {i.butler ? <Link to={`/butlers/${encodeURIComponent(i.butler)}`}>{i.butler}</Link> : null}
              </header>
              <p>{i.message}</p>
              <p className="muted">
                {i.kind.replaceAll("_", " ")} · {i.count} time{i.count === 1 ? "" : "s"} · last {ago(i.last_seen_at)}
              </p>
            </li>
          ))}
        </ul>
      </DataState>
    </section>
  );
}
