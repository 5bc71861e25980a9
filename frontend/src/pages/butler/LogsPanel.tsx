import { AutoRefreshControl } from "../../components/Filters";
import { DataState } from "../../components/DataState";
import { useButlerLogs } from "../../hooks/useApi";
import { useAutoRefresh } from "../../hooks/useAutoRefresh";

export function LogsPanel({ butler }: { butler: string }) {
  const refresh = useAutoRefresh(10);
  const logs = useButlerLogs(butler, refresh.interval);
  const tail = logs.data?.data;
  return (
    <div>
      <AutoRefreshControl {...refresh} />
      <DataState loading={logs.isLoading} error={logs.error} empty={tail?.lines.length === 0} emptyText="The log is empty.">
        {tail ? (
          <>
            <p className="muted">
              Last {tail.lines.length} lines from {tail.source}
              {tail.truncated ? " (older lines left out)" : ""}.
            </p>
            <pre className="log" aria-label={`Log of ${butler}`}>{tail.lines.join("\n")}</pre>
          </>
        ) : null}
      </DataState>
    </div>
  );
}
