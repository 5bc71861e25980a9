import { Link } from "react-router-dom";

import { COST_PERIOD_NAMES, COST_PERIODS, type CostPeriod } from "../api/enums";
import type { DailyCost } from "../api/types";
import { type Bar, BarChart } from "../components/BarChart";
import { DataState } from "../components/DataState";
import { sessionPath } from "../components/SessionTable";
import { useCostSummary, useCostsBySchedule, useDailyCosts, useTopSessions } from "../hooks/useApi";
import { oneOf, useUrlState } from "../hooks/useUrlState";
import { ago, money, tokens } from "../lib/format";

// Days of the daily chart for each period.
const DAYS: Record<CostPeriod, number> = { "24h": 1, "7d": 7, "30d": 30, "90d": 90, all: 90 };

export function dailyBars(days: DailyCost[]): Bar[] {
  return days.map((d) => ({
    label: d.date,
    parts: Object.entries(d.by_butler).map(([series, value]) => ({ series, value })),
  }));
}

export function CostsPage() {
  const [url, setUrl] = useUrlState({ period: "7d" });
  const period: CostPeriod = oneOf(url.period, COST_PERIODS) || "7d";
  const summary = useCostSummary(period);
  const daily = useDailyCosts(DAYS[period]);
  const top = useTopSessions(period);
  const bySchedule = useCostsBySchedule(period);
  const s = summary.data?.data;
  return (
    <section>
      <h1>Costs</h1>
      <div className="toolbar" role="group" aria-label="Period">
        {COST_PERIODS.map((value) => (
          <button key={value} type="button" aria-pressed={period === value} onClick={() => setUrl({ period: value })}>
            {COST_PERIOD_NAMES[value]}
          </button>
        ))}
      </div>
      <DataState loading={summary.isLoading} error={summary.error}>
        {s ? (
          <dl className="totals" aria-label="Cost summary">
            <div><dt>Total</dt><dd>{money(s.total_cost_usd, s.unpriced_sessions)}</dd></div>
            <div><dt>Sessions</dt><dd>{s.sessions}</dd></div>
            <div><dt>Unpriced sessions</dt><dd>{s.unpriced_sessions}</dd></div>
            <div><dt>Input tokens</dt><dd>{tokens(s.input_tokens)}</dd></div>
            <div><dt>Output tokens</dt><dd>{tokens(s.output_tokens)}</dd></div>
            <div><dt>Cached input tokens</dt><dd>{tokens(s.cached_tokens)}</dd></div>
            <div><dt>Cache savings</dt><dd>{money(s.cache_savings_usd)}</dd></div>
          </dl>
        ) : null}
      </DataState>
      <DataState loading={daily.isLoading} error={daily.error}>
        <BarChart title="Daily cost by butler (USD)" bars={dailyBars(daily.data?.data ?? [])} format={(n) => money(n)} />
      </DataState>
      {s ? (
        <>
          <BarChart
            title="Cost by model (USD)"
            bars={s.by_model.filter((m) => m.price).map((m) => ({ label: m.key, parts: [{ series: m.key, value: m.cost_usd }] }))}
            format={(n) => money(n)}
            notes={
              s.by_model.some((m) => !m.price) ? (
                <ul className="chart-notes" aria-label="Unpriced models">
                  {s.by_model.filter((m) => !m.price).map((m) => (
                    <li key={m.key} data-unpriced={m.key}>
                      <strong className="mono">{m.key}</strong>: no price known for this model; {m.unpriced_sessions} session
                      {m.unpriced_sessions === 1 ? "" : "s"} unpriced, not counted in the cost (set <code>BUTLERS_PRICES</code>).
                    </li>
                  ))}
                </ul>
              ) : null
            }
          />
          <h2>By model</h2>
          <table className="table" aria-label="Cost by model">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Sessions</th>
                <th scope="col">Tokens in/out</th>
                <th scope="col">Price per Mtok in/out</th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {s.by_model.map((m) => (
                <tr key={m.key}>
                  <td className="mono">{m.key}</td>
                  <td>{m.sessions}</td>
                  <td>{tokens(m.input_tokens)} / {tokens(m.output_tokens)}</td>
                  <td>{m.price ? `$${m.price.input_per_mtok} / $${m.price.output_per_mtok}` : "no price: unpriced"}</td>
                  <td>{money(m.cost_usd, m.unpriced_sessions)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <h2>By butler</h2>
          <table className="table" aria-label="Cost by butler">
            <thead>
              <tr>
                <th scope="col">Butler</th>
                <th scope="col">Sessions</th>
                <th scope="col">Tokens in/out</th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {s.by_butler.map((b) => (
                <tr key={b.key}>
                  <td>{b.key}</td>
                  <td>{b.sessions}</td>
                  <td>{tokens(b.input_tokens)} / {tokens(b.output_tokens)}</td>
                  <td>{money(b.cost_usd, b.unpriced_sessions)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : null}
      <h2>Most expensive sessions</h2>
      <DataState loading={top.isLoading} error={top.error} empty={top.data?.data.length === 0} emptyText="No priced sessions in this period.">
        <table className="table" aria-label="Most expensive sessions">
          <thead>
            <tr>
              <th scope="col">Session</th>
              <th scope="col">Butler</th>
              <th scope="col">Model</th>
              <th scope="col">Trigger</th>
              <th scope="col">Started</th>
              <th scope="col">Cost</th>
            </tr>
          </thead>
          <tbody>
            {top.data?.data.map((t) => (
              <tr key={`${t.butler}-${t.id}`}>
                <td><Link className="mono" to={sessionPath(t)}>{t.id.slice(0, 8)}</Link></td>
                <td>{t.butler}</td>
                <td className="mono">{t.model ?? "—"}</td>
                <td>{t.trigger_source}</td>
                <td>{ago(t.started_at)}</td>
                <td>{money(t.cost_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </DataState>
      <h2>By schedule</h2>
      <DataState loading={bySchedule.isLoading} error={bySchedule.error} empty={bySchedule.data?.data.length === 0} emptyText="No scheduled sessions in this period.">
        <table className="table" aria-label="Cost by schedule">
          <thead>
            <tr>
              <th scope="col">Butler</th>
              <th scope="col">Schedule</th>
              <th scope="col">Sessions</th>
              <th scope="col">Average</th>
              <th scope="col">Cost</th>
              <th scope="col">Last run</th>
            </tr>
          </thead>
          <tbody>
            {bySchedule.data?.data.map((r) => (
              <tr key={`${r.butler}-${r.schedule}`}>
                <td>{r.butler}</td>
                <td>{r.schedule}</td>
                <td>{r.sessions}</td>
                <td>{money(r.average_cost_usd)}</td>
                <td>{money(r.cost_usd, r.unpriced_sessions)}</td>
                <td>{ago(r.last_run_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </DataState>
    </section>
  );
}
