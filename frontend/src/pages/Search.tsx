import { Link } from "react-router-dom";

import { DataState } from "../components/DataState";
import { sessionPath } from "../components/SessionTable";
import { StatusBadge } from "../components/Status";
import { SEARCH_MIN_LENGTH, useSearch } from "../hooks/useSearch";
import { useUrlState, useUrlText } from "../hooks/useUrlState";
import { ago, json } from "../lib/format";

export function SearchPage() {
  const [url, setUrl] = useUrlState({ q: "" });
  const [query, setQuery] = useUrlText(url.q, (q) => setUrl({ q }, { replace: true }));
  const search = useSearch(query);
  const results = search.results.data?.data;
  return (
    <section>
      <h1>Search</h1>
      <label className="field wide">
        <span>Search sessions and state</span>
        <input type="search" value={query} onChange={(e) => setQuery(e.target.value)} placeholder={`at least ${SEARCH_MIN_LENGTH} characters`} />
      </label>
      {search.settled.length < SEARCH_MIN_LENGTH ? (
        <p className="muted">Type at least {SEARCH_MIN_LENGTH} characters.</p>
      ) : (
        <DataState loading={search.results.isLoading} error={search.results.error}>
          {results ? (
            <>
              <h2>Sessions ({results.sessions.length})</h2>
              {results.sessions.length ? (
                <ul className="hits" aria-label="Matching sessions">
                  {results.sessions.map((h) => (
                    <li key={`${h.butler}-${h.id}`}>
                      <Link to={sessionPath(h)}>{h.butler} · {h.id.slice(0, 8)}</Link> <StatusBadge status={h.status} />{" "}
                      <span className="muted">{ago(h.started_at)}</span>
                      <p>{h.snippet}</p>
                    </li>
                  ))}
                </ul>
              ) : (
                <p className="muted">No session matches.</p>
              )}
              <h2>State ({results.state.length})</h2>
              {results.state.length ? (
                <ul className="hits" aria-label="Matching state entries">
                  {results.state.map((h) => (
                    <li key={`${h.butler}-${h.key}`}>
                      <Link to={`/butlers/${encodeURIComponent(h.butler)}/state`}>{h.butler}</Link> <span className="mono">{h.key}</span>
                      <pre>{json(h.value)}</pre>
                    </li>
                  ))}
                </ul>
              ) : (
                <p className="muted">No state entry matches.</p>
              )}
            </>
          ) : null}
        </DataState>
      )}
    </section>
  );
}
