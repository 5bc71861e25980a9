// A small SVG bar chart (stacked by series), labelled for screen readers by a table.
export interface Bar {
  label: string;
  parts: { series: string; value: number }[];
}

const PALETTE = ["#2f6fb3", "#d9822b", "#3a9a5b", "#a34ea8", "#c23b3b", "#6b7a8f", "#1b9aaa"];

export function colourFor(series: string, all: string[]): string {
  const i = all.indexOf(series);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
}

export function BarChart({
  title,
  bars,
  format,
}: {
  title: string;
  bars: Bar[];
  format: (n: number) => string;
}) {
  const series = [...new Set(bars.flatMap((b) => b.parts.map((p) => p.series)))].sort();
  const totals = bars.map((b) => b.parts.reduce((sum, p) => sum + p.value, 0));
  const max = Math.max(...totals, 0);
  const width = 640;
  const height = 180;
  const slot = bars.length ? width / bars.length : width;
  const barWidth = Math.max(2, slot * 0.7);
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${width} ${height + 20}`} role="img" aria-label={title}>
        {bars.map((bar, i) => {
          let y = height;
          return (
            <g key={bar.label}>
              {bar.parts.map((part) => {
                const h = max > 0 ? (part.value / max) * height : 0;
                y -= h;
                return (
                  <rect
                    key={part.series}
                    x={i * slot + (slot - barWidth) / 2}
                    y={y}
                    width={barWidth}
                    height={h}
                    fill={colourFor(part.series, series)}
                  >
                    <title>{`${bar.label} ${part.series}: ${format(part.value)}`}</title>
                  </rect>
                );
              })}
              {bars.length <= 16 ? (
                <text x={i * slot + slot / 2} y={height + 14} textAnchor="middle" fontSize="10">
                  {bar.label.slice(5)}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
      <ul className="legend">
        {series.map((s) => (
          <li key={s}>
            <span className="swatch" style={{ background: colourFor(s, series) }} />
            {s}
          </li>
        ))}
      </ul>
    </figure>
  );
}
