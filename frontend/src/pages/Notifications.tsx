import { DELIVERY_STATUSES } from "../api/enums";
import { DataState, FailedButlers } from "../components/DataState";
import { RangeSelect, Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/Status";
import { useNotifications, useNotificationStats } from "../hooks/useApi";
import { TIME_RANGES, offsetOf, oneOf, sinceOf, useUrlState } from "../hooks/useUrlState";
import { ago, when } from "../lib/format";

const LIMIT = 25;
const FILTERS = { status: "", channel: "", range: "", offset: "0" };

export function NotificationsPage() {
  const [url, setUrl] = useUrlState(FILTERS);
  const status = oneOf(url.status, DELIVERY_STATUSES);
  const range = oneOf(url.range, TIME_RANGES);
  const offset = offsetOf(url.offset);
  const stats = useNotificationStats();
  const list = useNotifications({ status: status || undefined, channel: url.channel, since: sinceOf(range), offset, limit: LIMIT });
  const st = stats.data?.data;
  return (
    <section>
      <h1>Notifications</h1>
      <p className="muted">Every send of every tool: being sent, delivered, failed, held for your approval, or refused.</p>
      <DataState loading={stats.isLoading} error={stats.error}>
        {st ? (
          <dl className="totals" aria-label="Delivery totals">
            <div><dt>Total</dt><dd>{st.total}</dd></div>
            <div><dt>Sending</dt><dd>{st.sending}</dd></div>
            <div><dt>Sent</dt><dd>{st.sent}</dd></div>
            <div><dt>Failed</dt><dd>{st.failed}</dd></div>
            <div><dt>Held</dt><dd>{st.held}</dd></div>
            <div><dt>Refused</dt><dd>{st.refused}</dd></div>
            <div><dt>Last 24 h</dt><dd>{st.last_24h}</dd></div>
            <div><dt>Failed 24 h</dt><dd>{st.failed_24h}</dd></div>
            <div><dt>Last failure</dt><dd>{st.last_failure ? `${st.last_failure} (${ago(st.last_failure_at)})` : "none"}</dd></div>
          </dl>
        ) : null}
      </DataState>
      <div className="toolbar">
        <Select label="Status" value={status} options={DELIVERY_STATUSES} onChange={(s) => setUrl({ status: s })} />
        <Select label="Channel" value={url.channel} options={Object.keys(st?.by_channel ?? {})} onChange={(channel) => setUrl({ channel })} />
        <RangeSelect value={range} onChange={(r) => setUrl({ range: r })} />
      </div>
      <DataState loading={list.isLoading} error={list.error} empty={list.data?.data.length === 0} emptyText="No deliveries.">
        <FailedButlers names={list.data?.meta.failed_butlers} />
        <table className="table" aria-label="Deliveries">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Butler</th>
              <th scope="col">Channel</th>
              <th scope="col">Recipient</th>
              <th scope="col">Subject / body</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {list.data?.data.map((n) => (
              <tr key={n.id}>
                <td>{when(n.created_at)}</td>
                <td>{n.butler}</td>
                <td>{n.channel}</td>
                <td>{n.recipient ?? "—"}</td>
                <td className="prompt">{n.subject ? <strong>{n.subject}: </strong> : null}{n.body}</td>
                <td>
                  <StatusBadge status={n.status} />
                  {n.error ? <span className="muted"> {n.error}</span> : null}
                  {n.interrupted ? (
                    <span className="warn" data-interrupted={n.interrupted}>
                      {" "}sent again after a crash cut {n.interrupted === 1 ? "an attempt" : `${n.interrupted} attempts`} off: you may have it twice
                    </span>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={LIMIT} total={list.data?.meta.total} hasMore={list.data?.meta.has_more ?? false} onChange={(o) => setUrl({ offset: String(o) })} label="deliveries" />
      </DataState>
    </section>
  );
}
