// Formatting shared by every page. Unknown values are shown as such, never as 0.

export function money(value: number | null | undefined, unpriced: number | null = 0): string {
  unpriced = unpriced ?? 0;
  if (value === null || value === undefined) return unpriced > 0 ? "unpriced" : "—";
  const text = value < 1 && value > 0 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
  return unpriced > 0 ? `${text} + ${unpriced} unpriced` : text;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function ago(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "never";
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return iso;
  const seconds = Math.round((now - then) / 1000);
  const future = seconds < 0;
  const s = Math.abs(seconds);
  const text =
    s < 5
      ? "just now"
      : s < 60
        ? `${s} s`
        : s < 3600
          ? `${Math.floor(s / 60)} min`
          : s < 86400
            ? `${Math.floor(s / 3600)} h`
            : `${Math.floor(s / 86400)} d`;
  if (text === "just now") return text;
  return future ? `in ${text}` : `${text} ago`;
}

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

export function countdown(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "no deadline";
  if (seconds <= 0) return "expired";
  const m = Math.floor(seconds / 60);
  const s = Math.floor(seconds % 60);
  return m > 0 ? `${m} min ${s} s left` : `${s} s left`;
}

export function tokens(n: number | null | undefined): string {
  if (n === null || n === undefined) return "—";
  return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export function json(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2) ?? "null";
  } catch {
    return String(value);
  }
}

export function shortId(id: string | null | undefined): string {
  return id ? id.slice(0, 8) : "—";
}
