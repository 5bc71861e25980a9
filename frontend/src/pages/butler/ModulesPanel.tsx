import { DataState, ErrorBox } from "../../components/DataState";
import { StatusBadge } from "../../components/Status";
import { useModuleStates } from "../../hooks/useApi";
import { useToggleModule } from "../../hooks/useMutations";
import { ago } from "../../lib/format";

// The butler's modules: each one on or off, by its spec or by the owner's switch here
// (kept across restarts; a switched-off module's tools and background work stop).
export function ModulesPanel({ butler }: { butler: string }) {
  const states = useModuleStates(butler);
  const toggle = useToggleModule(butler);
  return (
    <div>
      {toggle.error ? <ErrorBox error={toggle.error} /> : null}
      <DataState loading={states.isLoading} error={states.error} empty={states.data?.data.length === 0} emptyText="No modules.">
        <table className="table" aria-label="Modules">
          <thead>
            <tr>
              <th scope="col">Module</th>
              <th scope="col">Enabled</th>
              <th scope="col">Status</th>
              <th scope="col">Switch</th>
            </tr>
          </thead>
          <tbody>
            {states.data?.data.map((m) => (
              <tr key={m.name} data-module={m.name}>
                <td>{m.name}</td>
                <td>
                  <StatusBadge status={m.enabled ? "enabled" : "disabled"} />{" "}
                  <span className="muted">
                    {m.source === "runtime" ? `switched off by ${m.disabled_by ?? "?"} ${ago(m.disabled_at)}` : "by its spec"}
                  </span>
                </td>
                <td>
                  <StatusBadge status={m.status} />
                  {m.error ? <span className="muted"> {m.error}</span> : null}
                </td>
                <td>
                  {m.toggleable ? (
                    <button
                      type="button"
                      disabled={toggle.isPending}
                      aria-label={`${m.enabled ? "Disable" : "Enable"} module ${m.name}`}
                      onClick={() => {
                        const question = m.enabled
                          ? `Switch module ${m.name} of ${butler} off? Its tools and background work stop until you switch it on again (also across restarts).`
                          : `Switch module ${m.name} of ${butler} on again?`;
                        if (window.confirm(question)) toggle.mutate({ module: m.name, enabled: !m.enabled });
                      }}
                    >
                      {m.enabled ? "Disable" : "Enable"}
                    </button>
                  ) : (
                    <span className="muted">{m.required ? `required: ${m.required}` : "—"}</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </DataState>
    </div>
  );
}
