import { METRIC_GROUPS, METRIC_RANGE_NAMES, METRIC_RANGES } from "../api/enums";
import type { Metrics, MetricSeries } from "../api/types";
import { Chart, type ChartData } from "../components/BarChart";
import { DataState, FailedButlers } from "../components/DataState";
import { useMetrics } from "../hooks/useApi";
import { oneOf, useUrlState } from "../hooks/useUrlState";
import { duration, money } from "../lib/format";

const FILTERS = { range: "7d", by: "butler" };

/** A bucket's start as a short label: the hour within a day, the day beyond. */
export function bucketLabel(iso: string, bucketSeconds: number): string {
  const d = new Date(iso);
  const day = `${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
  const hour = `${String(d.getHours()).padStart(2, "0")}:00`;
  if (bucketSeconds >= 86_400) return day;
  return bucketSeconds >= 6 * 3600 ? `${day} ${hour}` : hour;
}

function chartOf(m: Metrics, pick: (s: MetricSeries) => (number | null)[]): ChartData {
  return {
    labels: m.buckets.map((b) => bucketLabel(b, m.bucket_seconds)),
    series: m.series.map((s) => ({ key: s.key, values: pick(s) })),
  };
}

const total = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** What the cost chart leaves out: sessions without a price, by model or by butler. */
function UnpricedNotes({ m }: { m: Metrics }) {
  const missing = m.series
    .map((s) => ({ key: s.key, priced: s.priced, unpriced: total(s.unpriced_sessions) }))
    .filter((s) => s.unpriced > 0 || s.priced === false);
  if (!missing.length) return null;
  return (
    <ul className="chart-notes" aria-label="Unpriced">
      {missing.map((s) => (
        <li key={s.key} data-unpriced={s.key}>
          {s.priced === false ? (
            <>
              <strong className="mono">{s.key}</strong>: no price known for this model;{" "}
            </>
          ) : (
            <>
              <strong>{s.key}</strong>:{" "}
            </>
          )}
          {s.unpriced} session{s.unpriced === 1 ? "" : "s"} unpriced, not counted in the cost (set <code>BUTLERS_PRICES</code>).
        </li>
      ))}
    </ul>
  );
}

export function MetricsPage() {
  const [url, setUrl] = useUrlState(FILTERS);
  const range = oneOf(url.range, METRIC_RANGES) || "7d";
  const by = oneOf(url.by, METRIC_GROUPS) || "butler";
  const metrics = useMetrics({ range, by });
  const m = metrics.data?.data;
  return (
    <section>
      <h1>Metrics</h1>
      <p className="muted">Sessions, errors, cost and session duration over time, from every butler's session log.</p>
      <div className="toolbar">
        <div role="group" aria-label="Range">
          {METRIC_RANGES.map((r) => (
            <button key={r} type="button" aria-pressed={range === r} onClick={() => setUrl({ range: r })}>
              {METRIC_RANGE_NAMES[r]}
            </button>
          ))}
        </div>
        <div role="group" aria-label="Group by">
          {METRIC_GROUPS.map((g) => (
            <button key={g} type="button" aria-pressed={by === g} onClick={() => setUrl({ by: g })}>
              per {g}
            </button>
          ))}
        </div>
      </div>
      <DataState loading={metrics.isLoading} error={metrics.error}>
        <FailedButlers names={metrics.data?.meta?.failed_butlers} />
        {m ? (
          <div className="charts">
            <Chart name="sessions" title={`Sessions per ${by}`} data={chartOf(m, (s) => s.sessions)} format={(n) => `${n}`} />
            <Chart name="errors" title={`Failed sessions per ${by}`} data={chartOf(m, (s) => s.errors)} format={(n) => `${n}`} />
            <Chart
              name="cost"
              title={`Cost per ${by} (USD)`}
              data={chartOf(m, (s) => s.cost_usd)}
              format={(n) => money(n)}
              notes={<UnpricedNotes m={m} />}
            />
            <Chart
              name="duration"
              kind="line"
              title={`Mean session duration per ${by}`}
              data={chartOf(m, (s) => s.mean_duration_ms)}
              format={(n) => duration(n)}
            />
          </div>
        ) : null}
      </DataState>
    </section>
  );
}
