import { ago } from "../lib/format";

// A status is always text plus a symbol, never colour alone.

const TONES: Record<string, { tone: string; symbol: string }> = {
  ok: { tone: "good", symbol: "●" },
  healthy: { tone: "good", symbol: "●" },
  success: { tone: "good", symbol: "✓" },
  completed: { tone: "good", symbol: "✓" },
  done: { tone: "good", symbol: "✓" },
  approved: { tone: "good", symbol: "✓" },
  executed: { tone: "good", symbol: "✓" },
  sent: { tone: "good", symbol: "✓" },
  routed: { tone: "good", symbol: "✓" },
  dispatched: { tone: "good", symbol: "✓" },
  delivered: { tone: "good", symbol: "✓" },
  partial: { tone: "warn", symbol: "▲" },
  active: { tone: "good", symbol: "●" },
  enabled: { tone: "good", symbol: "●" },
  running: { tone: "info", symbol: "◐" },
  pending: { tone: "warn", symbol: "◔" },
  accepted: { tone: "info", symbol: "◔" },
  classified: { tone: "info", symbol: "◑" },
  degraded: { tone: "warn", symbol: "▲" },
  warning: { tone: "warn", symbol: "▲" },
  interrupted: { tone: "warn", symbol: "▲" },
  started: { tone: "info", symbol: "●" },
  restarted: { tone: "info", symbol: "↻" },
  crashed: { tone: "bad", symbol: "↻" },
  cancelled: { tone: "muted", symbol: "⊘" },
  superseded: { tone: "muted", symbol: "↻" },
  retracted: { tone: "muted", symbol: "⊘" },
  faded: { tone: "muted", symbol: "○" },
  expired: { tone: "muted", symbol: "○" },
  disabled: { tone: "muted", symbol: "○" },
  paused: { tone: "muted", symbol: "○" },
  down: { tone: "bad", symbol: "✕" },
  failed: { tone: "bad", symbol: "✕" },
  error: { tone: "bad", symbol: "✕" },
  rejected: { tone: "bad", symbol: "✕" },
  denied: { tone: "bad", symbol: "✕" },
  failing: { tone: "bad", symbol: "✕" },
  refused: { tone: "bad", symbol: "✕" },
  stalled: { tone: "warn", symbol: "▲" },
  quarantined: { tone: "warn", symbol: "⚠" },
  held: { tone: "warn", symbol: "◔" },
  starting: { tone: "info", symbol: "◔" },
  sending: { tone: "info", symbol: "◔" },
  dropped: { tone: "muted", symbol: "⊘" },
  ignored: { tone: "muted", symbol: "○" },
  timeout: { tone: "bad", symbol: "✕" },
};

export function toneOf(status: string): string {
  return TONES[status.toLowerCase()]?.tone ?? "muted";
}

export function StatusBadge({ status, label }: { status: string; label?: string }) {
  const entry = TONES[status.toLowerCase()] ?? { tone: "muted", symbol: "•" };
  return (
    <span className={`badge tone-${entry.tone}`} data-status={status}>
      <span aria-hidden="true">{entry.symbol} </span>
      {label ?? status}
    </span>
  );
}

/** "restarted 3 times, last 2 min ago after a crash" (null when it never restarted). */
export function Restarts({ restarts, at, crashed }: { restarts?: number | null; at?: string | null; crashed?: boolean | null }) {
  if (!restarts) return null;
  const times = restarts === 1 ? "once" : `${restarts} times`;
  const when = at ? `, last ${ago(at)}` : "";
  return (
    <span className={crashed ? "restarts warn" : "restarts"} data-restarts={restarts}>
      restarted {times}
      {when}
      {crashed ? " after a crash" : ""}
    </span>
  );
}
