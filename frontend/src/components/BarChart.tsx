// Charts drawn by Recharts: stacked bars or lines over labelled points, one colour per
// series, each with its numbers in a table (for screen readers, and to read exact values).
import type { ReactNode } from "react";
import {
  Bar as RechartsBar,
  BarChart as RechartsBarChart,
  CartesianGrid,
  Legend,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";

export interface Bar {
  label: string;
  parts: { series: string; value: number }[];
}

const PALETTE = ["#2f6fb3", "#d9822b", "#3a9a5b", "#a34ea8", "#c23b3b", "#6b7a8f", "#1b9aaa", "#b58900", "#7a5195", "#ef5675", "#2a9d8f", "#8d6e63"];

export function colourFor(series: string, all: string[]): string {
  const i = all.indexOf(series);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
}

/** Points with one value (or none) per series. */
export interface ChartData {
  labels: string[];
  series: { key: string; values: (number | null)[] }[];
}

export function barsToData(bars: Bar[]): ChartData {
  const keys = [...new Set(bars.flatMap((b) => b.parts.map((p) => p.series)))].sort();
  return {
    labels: bars.map((b) => b.label),
    series: keys.map((key) => ({
      key,
      values: bars.map((b) => b.parts.find((p) => p.series === key)?.value ?? 0),
    })),
  };
}

function rows(data: ChartData): Record<string, string | number | null>[] {
  return data.labels.map((label, i) => {
    const row: Record<string, string | number | null> = { label };
    for (const s of data.series) row[s.key] = s.values[i] ?? null;
    return row;
  });
}

export function Chart({
  title,
  data,
  format,
  kind = "bar",
  name,
  notes,
}: {
  title: string;
  data: ChartData;
  format: (n: number) => string;
  kind?: "bar" | "line";
  name?: string; // data-chart, for tests and styles
  notes?: ReactNode; // what the chart cannot show (an unpriced model, ...)
}) {
  const keys = data.series.map((s) => s.key);
  const points = rows(data);
  const empty = data.series.every((s) => s.values.every((v) => !v));
  const axes = (
    <>
      <CartesianGrid strokeDasharray="3 3" vertical={false} />
      <XAxis dataKey="label" tick={{ fontSize: 11 }} minTickGap={12} />
      <YAxis tick={{ fontSize: 11 }} tickFormatter={(v: number) => format(v)} width={64} allowDecimals={kind === "line"} />
      <Tooltip formatter={(v) => (typeof v === "number" ? format(v) : String(v ?? "—"))} />
      <Legend />
    </>
  );
  return (
    <figure className="chart" data-chart={name} aria-label={title}>
      <figcaption>{title}</figcaption>
      {empty ? (
        <p className="muted chart-empty">Nothing in this range.</p>
      ) : (
        <ResponsiveContainer width="100%" height={220}>
          {kind === "bar" ? (
            <RechartsBarChart data={points}>
              {axes}
              {keys.map((key) => (
                <RechartsBar key={key} dataKey={key} stackId="all" fill={colourFor(key, keys)} isAnimationActive={false} />
              ))}
            </RechartsBarChart>
          ) : (
            <LineChart data={points}>
              {axes}
              {keys.map((key) => (
                <Line key={key} dataKey={key} stroke={colourFor(key, keys)} dot={{ r: 2 }} connectNulls isAnimationActive={false} />
              ))}
            </LineChart>
          )}
        </ResponsiveContainer>
      )}
      {notes}
      <details className="chart-data">
        <summary>Numbers of “{title}”</summary>
        <table className="table" aria-label={`${title}: numbers`}>
          <thead>
            <tr>
              <th scope="col">Time</th>
              {keys.map((k) => (
                <th key={k} scope="col">{k}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {data.labels.map((label, i) => (
              <tr key={`${label}-${i}`}>
                <th scope="row">{label}</th>
                {data.series.map((s) => (
                  <td key={s.key} data-series={s.key}>{s.values[i] === null ? "—" : format(s.values[i] ?? 0)}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

/** The stacked bar chart of `bars` (the Costs page's daily and per-model charts). */
export function BarChart({ title, bars, format, notes }: { title: string; bars: Bar[]; format: (n: number) => string; notes?: ReactNode }) {
  return <Chart title={title} data={barsToData(bars)} format={format} notes={notes} />;
}
