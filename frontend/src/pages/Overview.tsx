import { Link } from "react-router-dom";

import type { ButlerCard, Overview } from "../api/types";
import { ActivityFeed } from "../components/ActivityFeed";
import { DataState, FailedButlers } from "../components/DataState";
import { Restarts, StatusBadge } from "../components/Status";
import { useOverview } from "../hooks/useApi";
import { ago, money } from "../lib/format";
import { ConnectorList } from "./Conversations";

function Totals({ totals }: { totals: Overview["totals"] }) {
  const items: [string, string][] = [
    ["Butlers", `${totals.butlers}`],
    ["Healthy", `${totals.ok}`],
    ["Degraded", `${totals.degraded}`],
    ["Down", `${totals.down}`],
    ["Running sessions", `${totals.running_sessions}`],
    ["Sessions (24 h)", `${totals.sessions_24h}`],
    ["Errors (24 h)", `${totals.errors_24h}`],
    ["Cost (24 h)", money(totals.cost_24h_usd, totals.unpriced_sessions_24h)],
    ["Pending approvals", `${totals.pending_approvals}`],
  ];
  return (
    <dl className="totals" aria-label="Totals">
      {items.map(([label, value]) => (
        <div key={label}>
          <dt>{label}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

export function ButlerCardView({ card }: { card: ButlerCard }) {
  return (
    <article className={`card status-${card.status}`} aria-labelledby={`card-${card.name}`} data-butler={card.name}>
      <header>
        <h2 id={`card-${card.name}`}>
          <Link to={`/butlers/${encodeURIComponent(card.name)}`}>{card.name}</Link>
        </h2>
        <StatusBadge status={card.status} />
      </header>
      {card.reason ? <p className="reason">{card.reason}</p> : null}
      {card.restarts ? (
        <p className="small">
          <Restarts restarts={card.restarts} at={card.last_restart_at} crashed={card.last_restart_after_crash} />
        </p>
      ) : null}
      {card.description ? <p className="muted">{card.description}</p> : null}
      {card.kube ? (
        <p className="kube">
          Kubernetes: {card.kube.phase ?? "unknown phase"} in {card.kube.namespace}
          {card.kube.conditions.length ? (
            <span>
              {" "}
              ({card.kube.conditions.map((c) => `${c.type}=${c.status}`).join(", ")})
            </span>
          ) : null}
        </p>
      ) : null}
      <p className="mono small">{card.url}</p>
      <ul className="chips" aria-label={`Modules of ${card.name}`}>
        {card.modules.map((m) => (
          <li key={m.name} className={m.error ? "chip chip-bad" : "chip"} title={m.error ?? m.status}>
            {m.name}
            {m.error ? <span> ✕ failed: {m.error}</span> : null}
          </li>
        ))}
      </ul>
      <dl className="stats">
        <div>
          <dt>Sessions 24 h</dt>
          <dd>{card.sessions_24h}</dd>
        </div>
        <div>
          <dt>Errors 24 h</dt>
          <dd>{card.errors_24h}</dd>
        </div>
        <div>
          <dt>Cost 24 h</dt>
          <dd>{money(card.cost_24h_usd, card.unpriced_sessions_24h)}</dd>
        </div>
        <div>
          <dt>Pending approvals</dt>
          <dd>{card.pending_approvals}</dd>
        </div>
        <div>
          <dt>Running</dt>
          <dd>{card.running_sessions}</dd>
        </div>
        <div>
          <dt>Next schedule</dt>
          <dd>{card.next_schedule ? `${card.next_schedule.name} ${ago(card.next_schedule.due_at)}` : "none"}</dd>
        </div>
        <div>
          <dt>Heartbeat</dt>
          <dd>{ago(card.heartbeat_at ?? card.checked_at)}</dd>
        </div>
      </dl>
    </article>
  );
}

export function OverviewPage() {
  const overview = useOverview();
  const data = overview.data?.data;
  return (
    <section>
      <h1>Overview</h1>
      <DataState loading={overview.isLoading} error={overview.error}>
        {data ? (
          <>
            <FailedButlers names={overview.data?.meta?.failed_butlers} />
            <Totals totals={data.totals} />
            <div className="cards">
              {data.butlers.map((card) => (
                <ButlerCardView key={card.name} card={card} />
              ))}
            </div>
            <section aria-labelledby="connectors">
              <h2 id="connectors">Channel connectors</h2>
              <ConnectorList connectors={data.connectors} />
            </section>
          </>
        ) : null}
      </DataState>
      <ActivityFeed />
    </section>
  );
}
