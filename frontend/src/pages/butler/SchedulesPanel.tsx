import { type FormEvent, useState } from "react";

import type { Schedule } from "../../api/types";
import { DataState, ErrorBox } from "../../components/DataState";
import { StatusBadge } from "../../components/Status";
import { useSchedules } from "../../hooks/useApi";
import { useCreateSchedule, useDeleteSchedule, useToggleSchedule, useUpdateSchedule } from "../../hooks/useMutations";
import { ago } from "../../lib/format";

function ScheduleForm({ butler, schedule, onDone }: { butler: string; schedule?: Schedule; onDone: () => void }) {
  const [name, setName] = useState(schedule?.name ?? "");
  const [cron, setCron] = useState(schedule?.cron ?? "0 9 * * *");
  const [prompt, setPrompt] = useState(schedule?.prompt ?? "");
  const create = useCreateSchedule(butler);
  const update = useUpdateSchedule(butler);
  const mutation = schedule ? update : create;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (schedule) {
      update.mutate({ id: schedule.id, body: { cron, prompt: prompt || null } }, { onSuccess: onDone });
    } else {
      create.mutate({ name, cron, prompt: prompt || null, enabled: true }, { onSuccess: onDone });
    }
  };
  return (
    <form className="editor" onSubmit={submit} aria-label={schedule ? `Edit schedule ${schedule.name}` : "New schedule"}>
      <label className="field">
        <span>Name</span>
        <input value={name} onChange={(e) => setName(e.target.value)} readOnly={!!schedule} required />
      </label>
      <label className="field">
        <span>Cron</span>
        <input value={cron} onChange={(e) => setCron(e.target.value)} required />
      </label>
      <label className="field wide">
        <span>Prompt</span>
        <textarea value={prompt} onChange={(e) => setPrompt(e.target.value)} rows={3} />
      </label>
      <button type="submit" disabled={mutation.isPending}>{schedule ? "Save schedule" : "Create schedule"}</button>
      <button type="button" onClick={onDone}>Cancel</button>
      {mutation.error ? <ErrorBox error={mutation.error} /> : null}
    </form>
  );
}

export function SchedulesPanel({ butler }: { butler: string }) {
  const schedules = useSchedules(butler);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);
  const toggle = useToggleSchedule(butler);
  const remove = useDeleteSchedule(butler);
  return (
    <div>
      <button type="button" onClick={() => setCreating(true)}>New schedule</button>
      {creating ? <ScheduleForm butler={butler} onDone={() => setCreating(false)} /> : null}
      {toggle.error ? <ErrorBox error={toggle.error} /> : null}
      {remove.error ? <ErrorBox error={remove.error} /> : null}
      <DataState loading={schedules.isLoading} error={schedules.error} empty={schedules.data?.data.length === 0} emptyText="No schedules.">
        <table className="table" aria-label="Schedules">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Cron</th>
              <th scope="col">Prompt / job</th>
              <th scope="col">Enabled</th>
              <th scope="col">Status</th>
              <th scope="col">Next</th>
              <th scope="col">Last run</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {schedules.data?.data.map((s) => (
              <tr key={s.id} data-schedule={s.name}>
                <td>{s.name} {s.source === "spec" ? <span className="muted">({s.source})</span> : null}</td>
                <td className="mono">{s.cron}</td>
                <td className="prompt">
                  {editing === s.id ? <ScheduleForm butler={butler} schedule={s} onDone={() => setEditing(null)} /> : s.prompt ?? s.job_name ?? "—"}
                </td>
                <td>
                  <StatusBadge status={s.enabled ? "enabled" : "disabled"} />
                </td>
                <td>
                  <StatusBadge status={s.status} />
                  {s.last_error ? <span className="muted"> {s.last_error}</span> : null}
                </td>
                <td>{s.enabled ? ago(s.next_due_at) : "—"}</td>
                <td>{ago(s.last_run_at)}</td>
                <td>
                  <button type="button" onClick={() => toggle.mutate({ id: s.id, enabled: !s.enabled })} aria-label={`${s.enabled ? "Disable" : "Enable"} ${s.name}`}>
                    {s.enabled ? "Disable" : "Enable"}
                  </button>{" "}
                  <button type="button" onClick={() => setEditing(s.id)} aria-label={`Edit ${s.name}`}>Edit</button>{" "}
                  <button
                    type="button"
                    onClick={() => {
                      if (window.confirm(`Delete schedule ${s.name}?`)) remove.mutate(s.id);
                    }}
                    aria-label={`Delete ${s.name}`}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </DataState>
    </div>
  );
}
