import { useMemo, useState } from "react";
import { Link } from "react-router-dom";

import type { CalendarEntry } from "../api/types";
import { DataState, ErrorBox, FailedButlers } from "../components/DataState";
import { useCalendarWorkspace, useCalendarWorkspaceMeta } from "../hooks/useApi";
import { useCalendarSync, useCalendarUserEvent } from "../hooks/useMutations";
import { ago } from "../lib/format";

const DAY = 86_400_000;

function startOfWeek(date: Date): Date {
  const day = new Date(date.getFullYear(), date.getMonth(), date.getDate());
  const monday = (day.getDay() + 6) % 7;
  return new Date(day.getTime() - monday * DAY);
}

function localInput(iso: string): string {
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function clock(iso: string): string {
  return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function dayLabel(date: Date): string {
  return date.toLocaleDateString([], { weekday: "short", day: "numeric", month: "short" });
}

type Draft = {
  event_id?: string;
  recurrence_id?: string; // set on an occurrence of a recurring event
  occurrence_only?: boolean; // change or delete that occurrence, not the series
  butler?: string;
  summary: string;
  start: string;
  end: string;
  location: string;
  description: string;
};

function emptyDraft(day: Date): Draft {
  const start = new Date(day.getTime() + 9 * 3_600_000);
  return {
    summary: "",
    start: localInput(start.toISOString()),
    end: localInput(new Date(start.getTime() + 3_600_000).toISOString()),
    location: "",
    description: "",
  };
}

function Entry({ entry, onEdit }: { entry: CalendarEntry; onEdit: (e: CalendarEntry) => void }) {
  const editable = entry.view === "user" && entry.editable;
  const text = `${entry.all_day ? "all day" : clock(entry.start)} ${entry.title}`;
  return (
    <li className={`calendar-entry calendar-${entry.view}`} title={`${entry.butler} · ${entry.calendar ?? entry.source_type}`}>
      {editable ? (
        <button type="button" className="link" onClick={() => onEdit(entry)}>{text}</button>
      ) : (
        <span>{text} <span className="muted">({entry.butler})</span></span>
      )}
    </li>
  );
}

export function CalendarPage() {
  const [weekStart, setWeekStart] = useState(() => startOfWeek(new Date()));
  const [mode, setMode] = useState<"week" | "agenda">("week");
  const [lanes, setLanes] = useState({ user: true, butler: true });
  const [draft, setDraft] = useState<Draft | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const range = useMemo(
    () => ({ start: weekStart.toISOString(), end: new Date(weekStart.getTime() + 7 * DAY).toISOString() }),
    [weekStart],
  );
  const user = useCalendarWorkspace({ view: "user", ...range });
  const butler = useCalendarWorkspace({ view: "butler", ...range });
  const meta = useCalendarWorkspaceMeta();
  const sync = useCalendarSync();
  const write = useCalendarUserEvent();
  const writable = meta.data?.data.writable ?? [];

  const entries = [
    ...(lanes.user ? (user.data?.data ?? []) : []),
    ...(lanes.butler ? (butler.data?.data ?? []) : []),
  ].sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
  const days = Array.from({ length: 7 }, (_, i) => new Date(weekStart.getTime() + i * DAY));
  const onDay = (day: Date) =>
    entries.filter((e) => {
      const start = Date.parse(e.start);
      return start < day.getTime() + DAY && Math.max(Date.parse(e.end), start + 1) > day.getTime();
    });

  function edit(entry: CalendarEntry) {
    setNotice(null);
    setDraft({
      event_id: entry.event_id ?? undefined,
      recurrence_id: entry.recurring ? (entry.recurrence_id ?? undefined) : undefined,
      occurrence_only: entry.recurring && entry.recurrence_id !== null,
      butler: entry.butler,
      summary: entry.title,
      start: localInput(entry.start),
      end: localInput(entry.end),
      location: entry.location ?? "",
      description: entry.description ?? "",
    });
  }

  async function save(event: React.FormEvent) {
    event.preventDefault();
    if (!draft) return;
    const fields = {
      summary: draft.summary,
      start: new Date(draft.start).toISOString(),
      end: new Date(draft.end).toISOString(),
      location: draft.location || null,
      description: draft.description || null,
    };
    await write.mutateAsync({
      action: draft.event_id ? "update" : "create",
      butler: draft.butler ?? writable[0] ?? null,
      event_id: draft.event_id ?? null,
      recurrence_id: draft.occurrence_only ? (draft.recurrence_id ?? null) : null,
      event: fields,
    });
    setDraft(null);
    setNotice(draft.event_id ? "Event updated on the calendar server." : "Event created on the calendar server.");
  }

  async function remove() {
    if (!draft?.event_id) return;
    const outcome = await write.mutateAsync({
      action: "delete",
      butler: draft.butler ?? null,
      event_id: draft.event_id,
      recurrence_id: draft.occurrence_only ? (draft.recurrence_id ?? null) : null,
    });
    setDraft(null);
    setNotice(
      outcome.data.status === "pending_approval"
        ? "The deletion waits for your approval on the Approvals page."
        : "Event deleted.",
    );
  }

  return (
    <section>
      <h1>Calendar</h1>
      <p className="muted">
        The owner's events (synced over CalDAV by the butlers with the calendar module) beside the butlers' own
        entries (their schedules).
      </p>
      <div className="toolbar" role="toolbar" aria-label="Calendar navigation">
        <button type="button" onClick={() => setWeekStart(new Date(weekStart.getTime() - 7 * DAY))}>Previous week</button>
        <button type="button" onClick={() => setWeekStart(startOfWeek(new Date()))}>This week</button>
        <button type="button" onClick={() => setWeekStart(new Date(weekStart.getTime() + 7 * DAY))}>Next week</button>
        <strong>{dayLabel(days[0])} – {dayLabel(days[6])}</strong>
        <button type="button" aria-pressed={mode === "week"} onClick={() => setMode("week")}>Week</button>
        <button type="button" aria-pressed={mode === "agenda"} onClick={() => setMode("agenda")}>Agenda</button>
        <label><input type="checkbox" checked={lanes.user} onChange={(e) => setLanes({ ...lanes, user: e.target.checked })} /> Owner's events</label>
        <label><input type="checkbox" checked={lanes.butler} onChange={(e) => setLanes({ ...lanes, butler: e.target.checked })} /> Butlers' entries</label>
        <button type="button" disabled={!writable.length} onClick={() => { setNotice(null); setDraft(emptyDraft(weekStart)); }}>New event</button>
      </div>

      <DataState loading={meta.isLoading} error={meta.error} empty={meta.data?.data.sources.length === 0} emptyText="No calendar synced yet (a butler needs the calendar module and a CalDAV server).">
        <table className="table" aria-label="Calendar sources">
          <thead>
            <tr><th scope="col">Butler</th><th scope="col">Calendar</th><th scope="col">Sync</th><th scope="col">Last synced</th><th scope="col">Error</th></tr>
          </thead>
          <tbody>
            {meta.data?.data.sources.map((s) => (
              <tr key={`${s.butler}/${s.source_id}`}>
                <td>{s.butler}</td>
                <td>{s.calendar}{s.writable ? "" : " (read-only)"}</td>
                <td>{s.sync_state}</td>
                <td>{ago(s.last_synced_at)}</td>
                <td>{s.last_error ?? "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </DataState>
      <button type="button" disabled={sync.isPending || !writable.length} onClick={() => sync.mutate(undefined)}>
        {sync.isPending ? "Syncing…" : "Sync now"}
      </button>
      {sync.error ? <ErrorBox error={sync.error} /> : null}
      {notice ? <p role="status">{notice} {notice.includes("Approvals") ? <Link to="/approvals">Open Approvals</Link> : null}</p> : null}

      {draft ? (
        <form className="panel" aria-label={draft.event_id ? "Edit event" : "New event"} onSubmit={save}>
          <h2>{draft.event_id ? "Edit event" : "New event"}</h2>
          {!draft.event_id && writable.length > 1 ? (
            <label>Butler <select value={draft.butler ?? writable[0]} onChange={(e) => setDraft({ ...draft, butler: e.target.value })}>
              {writable.map((name) => <option key={name}>{name}</option>)}
            </select></label>
          ) : null}
          {draft.recurrence_id ? (
            <label><input type="checkbox" checked={draft.occurrence_only ?? false} onChange={(e) => setDraft({ ...draft, occurrence_only: e.target.checked })} /> Only this occurrence (else the whole series)</label>
          ) : null}
          <label>Title <input required maxLength={300} value={draft.summary} onChange={(e) => setDraft({ ...draft, summary: e.target.value })} /></label>
          <label>Start <input type="datetime-local" required value={draft.start} onChange={(e) => setDraft({ ...draft, start: e.target.value })} /></label>
          <label>End <input type="datetime-local" required value={draft.end} onChange={(e) => setDraft({ ...draft, end: e.target.value })} /></label>
          <label>Location <input maxLength={300} value={draft.location} onChange={(e) => setDraft({ ...draft, location: e.target.value })} /></label>
          <label>Description <textarea value={draft.description} onChange={(e) => setDraft({ ...draft, description: e.target.value })} /></label>
          <div className="toolbar">
            <button type="submit" disabled={write.isPending}>Save</button>
            {draft.event_id ? <button type="button" disabled={write.isPending} onClick={remove}>Delete…</button> : null}
            <button type="button" onClick={() => setDraft(null)}>Cancel</button>
          </div>
          {write.error ? <ErrorBox error={write.error} /> : null}
        </form>
      ) : null}

      <DataState loading={user.isLoading || butler.isLoading} error={user.error ?? butler.error}>
        <FailedButlers names={[...(user.data?.meta?.failed_butlers ?? []), ...(butler.data?.meta?.failed_butlers ?? [])]} />
        {mode === "week" ? (
          <div className="calendar-week" aria-label="Week">
            {days.map((day) => (
              <div key={day.toISOString()} className="calendar-day">
                <h3>{dayLabel(day)}</h3>
                <ul>{onDay(day).map((e) => <Entry key={e.id} entry={e} onEdit={edit} />)}</ul>
              </div>
            ))}
          </div>
        ) : (
          <div aria-label="Agenda">
            {days.filter((day) => onDay(day).length).map((day) => (
              <div key={day.toISOString()}>
                <h3>{dayLabel(day)}</h3>
                <ul>{onDay(day).map((e) => <Entry key={e.id} entry={e} onEdit={edit} />)}</ul>
              </div>
            ))}
            {entries.length === 0 ? <p className="muted">Nothing this week.</p> : null}
          </div>
        )}
      </DataState>
    </section>
  );
}
