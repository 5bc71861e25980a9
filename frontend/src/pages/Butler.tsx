import { useState } from "react";
import { Link, NavLink, useParams } from "react-router-dom";

import { DataState } from "../components/DataState";
import { Pager } from "../components/Pager";
import { SessionTable } from "../components/SessionTable";
import { Restarts, StatusBadge } from "../components/Status";
import { useButler, useButlerSessions } from "../hooks/useApi";
import { ActionsPanel } from "./butler/ActionsPanel";
import { ConfigPanel } from "./butler/ConfigPanel";
import { LogsPanel } from "./butler/LogsPanel";
import { ModulesPanel } from "./butler/ModulesPanel";
import { SchedulesPanel } from "./butler/SchedulesPanel";
import { StatePanel } from "./butler/StatePanel";
import { TablesPanel } from "./butler/TablesPanel";
import { ToolsPanel } from "./butler/ToolsPanel";

const TABS: [string, string][] = [
  ["sessions", "Sessions"],
  ["state", "State"],
  ["schedules", "Schedules"],
  ["tools", "Tools"],
  ["modules", "Modules"],
  ["tables", "Data"],
  ["config", "Config"],
  ["logs", "Logs"],
  ["actions", "Trigger & tick"],
];

function SessionsTab({ butler }: { butler: string }) {
  const [offset, setOffset] = useState(0);
  const sessions = useButlerSessions(butler, { offset, limit: 25 });
  return (
    <DataState loading={sessions.isLoading} error={sessions.error} empty={sessions.data?.data.length === 0} emptyText="No sessions yet.">
      <SessionTable sessions={sessions.data?.data ?? []} showButler={false} />
      <Pager offset={offset} limit={25} total={sessions.data?.meta.total} hasMore={sessions.data?.meta.has_more ?? false} onChange={setOffset} label="sessions" />
    </DataState>
  );
}

export function ButlerPage() {
  const { name = "", tab = "sessions" } = useParams();
  const butler = useButler(name);
  const b = butler.data?.data;
  const base = `/butlers/${encodeURIComponent(name)}`;
  return (
    <section>
      <p>
        <Link to="/">← Overview</Link>
      </p>
      <h1>
        {name} {b ? <StatusBadge status={b.status} /> : null}
      </h1>
      <DataState loading={butler.isLoading} error={butler.error}>
        {b ? (
          <>
            {b.reason ? <p className="reason">{b.reason}</p> : null}
            <p>{b.description}</p>
            <dl className="facts">
              <div><dt>MCP endpoint</dt><dd className="mono">{b.url}</dd></div>
              <div><dt>Schema</dt><dd className="mono">{b.db_schema}</dd></div>
              <div><dt>Version</dt><dd>{b.version ?? "—"}</dd></div>
              <div>
                <dt>Restarts</dt>
                <dd>{b.restarts ? <Restarts restarts={b.restarts} at={b.last_restart_at} crashed={b.last_restart_after_crash} /> : b.restarts === 0 ? "none" : "—"}</dd>
              </div>
              <div><dt>Modules</dt><dd>{b.modules.map((m) => `${m.name}${m.enabled ? "" : " (switched off)"}${m.error ? ` (failed: ${m.error})` : ""}`).join(", ") || "none"}</dd></div>
              {b.kube ? (
                <div>
                  <dt>Kubernetes</dt>
                  <dd>
                    {b.kube.phase ?? "unknown"} in {b.kube.namespace};{" "}
                    {b.kube.conditions.map((c) => `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ""}`).join(", ")}
                  </dd>
                </div>
              ) : null}
            </dl>
          </>
        ) : null}
      </DataState>
      <nav className="tabs" aria-label={`Sections of ${name}`}>
        <ul>
          {TABS.map(([key, label]) => (
            <li key={key}>
              <NavLink to={`${base}/${key}`} className={() => (tab === key ? "active" : "")} aria-current={tab === key ? "page" : undefined}>
                {label}
              </NavLink>
            </li>
          ))}
        </ul>
      </nav>
      <div className="tab-body">
        {tab === "sessions" ? <SessionsTab butler={name} /> : null}
        {tab === "state" ? <StatePanel butler={name} /> : null}
        {tab === "schedules" ? <SchedulesPanel butler={name} /> : null}
        {tab === "tools" ? <ToolsPanel butler={name} /> : null}
        {tab === "modules" ? <ModulesPanel butler={name} /> : null}
        {tab === "tables" ? <TablesPanel butler={name} /> : null}
        {tab === "config" ? <ConfigPanel butler={name} /> : null}
        {tab === "logs" ? <LogsPanel butler={name} /> : null}
        {tab === "actions" ? <ActionsPanel butler={name} /> : null}
        {!TABS.some(([key]) => key === tab) ? <p role="alert">There is no section {tab}.</p> : null}
      </div>
    </section>
  );
}
