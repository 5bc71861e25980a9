import { SESSION_KINDS, SESSION_STATUSES, type SessionKind } from "../api/enums";
import { DataState, FailedButlers } from "../components/DataState";
import { AutoRefreshControl, RangeSelect, Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { SessionTable } from "../components/SessionTable";
import { useButlers, useSessionKinds, useSessions } from "../hooks/useApi";
import { useAutoRefresh } from "../hooks/useAutoRefresh";
import { TIME_RANGES, offsetOf, oneOf, sinceOf, useUrlState, useUrlText } from "../hooks/useUrlState";

const LIMIT = 25;
const FILTERS = { butler: "", status: "", trigger: "", range: "", kind: "", offset: "0" };

/** One tab per kind of session, with how many match the other filters. */
function KindTabs({ kind, counts, onChange }: { kind: SessionKind | ""; counts?: { kind: SessionKind; count: number }[]; onChange: (k: SessionKind | "") => void }) {
  const total = counts?.reduce((n, c) => n + c.count, 0);
  const tab = (value: SessionKind | "", text: string, count?: number) => (
    <button key={value || "all"} type="button" role="tab" aria-selected={kind === value} data-kind={value || "all"} onClick={() => onChange(value)}>
      {text}
      {count !== undefined ? <span className="count"> {count}</span> : null}
    </button>
  );
  return (
    <div className="tabs kinds" role="tablist" aria-label="Kinds of session">
      {tab("", "All", total)}
      {(Object.entries(SESSION_KINDS) as [SessionKind, string][]).map(([k, text]) => tab(k, text, counts?.find((c) => c.kind === k)?.count))}
    </div>
  );
}

export function SessionsPage() {
  const [url, setUrl] = useUrlState(FILTERS);
  const status = oneOf(url.status, SESSION_STATUSES);
  const kind = oneOf(url.kind, Object.keys(SESSION_KINDS) as SessionKind[]);
  const range = oneOf(url.range, TIME_RANGES);
  const offset = offsetOf(url.offset);
  const [trigger, setTrigger] = useUrlText(url.trigger, (t) => setUrl({ trigger: t }, { replace: true }));
  const refresh = useAutoRefresh(30);
  const butlers = useButlers();
  const filters = {
    butler: url.butler ? [url.butler] : undefined,
    status: status || undefined,
    trigger_source: url.trigger || undefined,
    since: sinceOf(range),
  };
  const sessions = useSessions({ ...filters, kind: kind ? [kind] : undefined, offset, limit: LIMIT }, refresh.interval);
  const kinds = useSessionKinds(filters, refresh.interval);
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
      <KindTabs kind={kind} counts={kinds.data?.data} onChange={(k) => setUrl({ kind: k })} />
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
