import { useState } from "react";

import { SESSION_STATUSES, type SessionStatus } from "../api/enums";
import { DataState, FailedButlers } from "../components/DataState";
import { AutoRefreshControl, Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { SessionTable } from "../components/SessionTable";
import { useButlers, useSessions } from "../hooks/useApi";
import { useAutoRefresh } from "../hooks/useAutoRefresh";

const LIMIT = 25;

export function SessionsPage() {
  const [butler, setButler] = useState("");
  const [status, setStatus] = useState<SessionStatus | "">("");
  const [trigger, setTrigger] = useState("");
  const [offset, setOffset] = useState(0);
  const refresh = useAutoRefresh(30);
  const butlers = useButlers();
  const sessions = useSessions(
    {
      butler: butler ? [butler] : undefined,
      status: status || undefined,
      trigger_source: trigger,
      offset,
      limit: LIMIT,
    },
    refresh.interval,
  );
  const reset = <T,>(set: (v: T) => void) => (v: T) => {
    set(v);
    setOffset(0);
  };
  return (
    <section>
      <h1>Sessions</h1>
      <div className="toolbar">
        <Select label="Butler" value={butler} options={(butlers.data?.data ?? []).map((b) => b.name)} onChange={reset(setButler)} />
        <Select label="Status" value={status} options={SESSION_STATUSES} onChange={reset(setStatus)} />
        <label className="field">
          <span>Trigger source</span>
          <input
            value={trigger}
            placeholder="e.g. route or schedule:daily"
            onChange={(e) => reset(setTrigger)(e.target.value.trim())}
          />
        </label>
        <AutoRefreshControl {...refresh} />
      </div>
      <DataState loading={sessions.isLoading} error={sessions.error} empty={sessions.data?.data.length === 0} emptyText="No sessions match.">
        <FailedButlers names={sessions.data?.meta.failed_butlers} />
        <SessionTable sessions={sessions.data?.data ?? []} />
        <Pager
          offset={offset}
          limit={LIMIT}
          total={sessions.data?.meta.total}
          hasMore={sessions.data?.meta.has_more ?? false}
          onChange={setOffset}
          label="sessions"
        />
      </DataState>
    </section>
  );
}
