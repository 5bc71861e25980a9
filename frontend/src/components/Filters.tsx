import type { ChangeEvent } from "react";

import { REFRESH_CHOICES, type RefreshSeconds } from "../hooks/useAutoRefresh";
import { TIME_RANGE_NAMES, TIME_RANGES, type TimeRange } from "../hooks/useUrlState";

/** A filter: "all" ("") or one of `options` (a value, or a value and its label). */
export function Select<T extends string>({
  label,
  value,
  options,
  onChange,
}: {
  label: string;
  value: T | "";
  options: readonly (T | readonly [T, string])[];
  onChange: (value: T | "") => void;
}) {
  return (
    <label className="field">
      <span>{label}</span>
      <select value={value} onChange={(e: ChangeEvent<HTMLSelectElement>) => onChange(e.target.value as T | "")}>
        <option value="">all</option>
        {options.map((o) => {
          const [v, text] = typeof o === "string" ? [o, o] : o;
          return (
            <option key={v} value={v}>
              {text}
            </option>
          );
        })}
      </select>
    </label>
  );
}

export function AutoRefreshControl({
  seconds,
  paused,
  setSeconds,
  toggle,
}: {
  seconds: RefreshSeconds;
  paused: boolean;
  setSeconds: (s: RefreshSeconds) => void;
  toggle: () => void;
}) {
  return (
    <div className="refresh" role="group" aria-label="Auto-refresh">
      <label className="field">
        <span>Refresh every</span>
        <select
          value={seconds}
          onChange={(e) => setSeconds(Number(e.target.value) as RefreshSeconds)}
          disabled={paused}
        >
          {REFRESH_CHOICES.map((c) => (
            <option key={c} value={c}>
              {c} s
            </option>
          ))}
        </select>
      </label>
      <button type="button" onClick={toggle} aria-pressed={paused}>
        {paused ? "Resume auto-refresh" : "Pause auto-refresh"}
      </button>
    </div>
  );
}

/** A time range filter ("all time" or one of the ranges), for a page keeping it in its URL. */
export function RangeSelect({ value, onChange }: { value: TimeRange | ""; onChange: (value: TimeRange | "") => void }) {
  return (
    <label className="field">
      <span>Time range</span>
      <select value={value} onChange={(e: ChangeEvent<HTMLSelectElement>) => onChange(e.target.value as TimeRange | "")}>
        <option value="">all time</option>
        {TIME_RANGES.map((r) => (
          <option key={r} value={r}>
            {TIME_RANGE_NAMES[r]}
          </option>
        ))}
      </select>
    </label>
  );
}
