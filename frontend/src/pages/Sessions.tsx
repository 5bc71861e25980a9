import { SESSION_STATUSES } from "../api/enums";
import { DataState, FailedButlers } from "../components/DataState";
import { AutoRefreshControl, RangeSelect, Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { SessionTable } from "../components/SessionTable";
import { useButlers, useSessions } from "../hooks/useApi";
import { useAutoRefresh } from "../hooks/useAutoRefresh";
import { TIME_RANGES, offsetOf, oneOf, sinceOf, useUrlState, useUrlText } from "../hooks/useUrlState";

const LIMIT = 25;
const FILTERS = { butler: "", status: "", trigger: "", range: "", offset: "0" };

export function SessionsPage() {
  const [url, setUrl] = useUrlState(FILTERS);
  const status = oneOf(url.status, SESSION_STATUSES);
  const range = oneOf(url.range, TIME_RANGES);
  const offset = offsetOf(url.offset);
  const [trigger, setTrigger] = useUrlText(url.trigger, (t) => setUrl({ trigger: t }, { replace: true }));
  const refresh = useAutoRefresh(30);
  const butlers = useButlers();
  const sessions = useSessions(
    {
      butler: url.butler ? [url.butler] : undefined,
      status: status || undefined,
      trigger_source: url.trigger,
      since: sinceOf(range),
      offset,
      limit: LIMIT,
    },
    refresh.interval,
  );
  return (
    <section>
      <h1>Sessions</h1>
      <div className="toolbar">
        <Select label="Butler" value={url.butler} options={(butlers.data?.data ?? []).map((b) => b.name)} onChange={(butler) => setUrl({ butler })} />
        <Select label="Status" value={status} options={SESSION_STATUSES} onChange={(s) => setUrl({ status: s })} />
        <RangeSelect value={range} onChange={(r) => setUrl({ range: r })} />
        <label className="field">
          <span>Trigger source</span>
          <input
            value={trigger}
            placeholder="e.g. route or schedule:daily"
            onChange={(e) => setTrigger(e.target.value, e.target.value.trim())}
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
          onChange={(o) => setUrl({ offset: String(o) })}
          label="sessions"
        />
      </DataState>
    </section>
  );
}
