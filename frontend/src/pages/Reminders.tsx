import { DataState, FailedButlers } from "../components/DataState";
import { Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/Status";
import { useReminders } from "../hooks/useApi";
import { useCancelReminder } from "../hooks/useMutations";
import { offsetOf, oneOf, useUrlState } from "../hooks/useUrlState";
import { when } from "../lib/format";

const LIMIT = 25;
const STATUSES = ["pending", "delivered", "failed", "cancelled"] as const;
const FILTERS = { status: "", offset: "0" };

export function RemindersPage() {
  const [url, setUrl] = useUrlState(FILTERS);
  const status = oneOf(url.status, STATUSES);
  const offset = offsetOf(url.offset);
  const list = useReminders({ status: status || undefined, offset, limit: LIMIT });
  const cancel = useCancelReminder();
  return (
    <section>
      <h1>Reminders</h1>
      <p className="muted">
        What each butler will remind you of, through the messenger: one-shot or recurring
        (RFC 5545 rules in the owner's time zone).
      </p>
      <div className="toolbar">
        <Select label="Status" value={status} options={STATUSES} onChange={(s) => setUrl({ status: s })} />
      </div>
      {cancel.error ? <p role="alert" className="error">{String(cancel.error.message)}</p> : null}
      <DataState loading={list.isLoading} error={list.error} empty={list.data?.data.length === 0} emptyText="No reminders.">
        <FailedButlers names={list.data?.meta.failed_butlers} />
        <table className="table" aria-label="Reminders">
          <thead>
            <tr>
              <th scope="col">Next due</th>
              <th scope="col">Butler</th>
              <th scope="col">Text</th>
              <th scope="col">Repeats</th>
              <th scope="col">Status</th>
              <th scope="col">Sent</th>
              <th scope="col">Made by</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.data?.data.map((r) => (
              <tr key={`${r.butler}:${r.id}`}>
                <td>{r.next_due_at ? when(r.next_due_at) : "—"}</td>
                <td>{r.butler}</td>
                <td className="prompt">{r.text}</td>
                <td>{r.rrule ? `${r.rrule} (${r.time_zone})` : "once"}</td>
                <td>
                  <StatusBadge status={r.status} />
                  {r.last_late ? <span className="muted"> late</span> : null}
                  {r.last_error ? <span className="muted"> {r.last_error}</span> : null}
                </td>
                <td>{r.delivered_count}{r.last_delivered_at ? ` (last ${when(r.last_delivered_at)})` : ""}</td>
                <td>{r.created_by}</td>
                <td>
                  {r.status === "pending" ? (
                    <button
                      type="button"
                      disabled={cancel.isPending}
                      onClick={() => cancel.mutate({ butler: r.butler, id: r.id })}
                      aria-label={`Cancel reminder ${r.text}`}
                    >
                      Cancel
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={LIMIT} total={list.data?.meta.total} hasMore={list.data?.meta.has_more ?? false} onChange={(o) => setUrl({ offset: String(o) })} label="reminders" />
      </DataState>
    </section>
  );
}
