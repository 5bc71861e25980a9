import { DataState } from "../../components/DataState";
import { useButlerConfig } from "../../hooks/useApi";
import { json } from "../../lib/format";

export function ConfigPanel({ butler }: { butler: string }) {
  const config = useButlerConfig(butler);
  const c = config.data?.data;
  return (
    <DataState loading={config.isLoading} error={config.error}>
      {c ? (
        <>
          <p className="muted">From {c.source ?? "the Butler resource"} (read-only: change the Butler resource to change it).</p>
          <h3>Instructions</h3>
          <pre className="prompt-block">{c.instructions ?? "(none)"}</pre>
          <h3>Butler resource</h3>
          <pre>{json(c.config)}</pre>
        </>
      ) : null}
    </DataState>
  );
}
