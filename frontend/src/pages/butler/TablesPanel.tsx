import { useState } from "react";

import { DataState } from "../../components/DataState";
import { Pager } from "../../components/Pager";
import { useButlerTables, useTableRows } from "../../hooks/useApi";

function cell(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

export function TablesPanel({ butler }: { butler: string }) {
  const tables = useButlerTables(butler);
  const [table, setTable] = useState<string | null>(null);
  const [offset, setOffset] = useState(0);
  const rows = useTableRows(butler, table, offset);
  const info = tables.data?.data.find((t) => t.name === table);
  return (
    <div className="split">
      <DataState loading={tables.isLoading} error={tables.error} empty={tables.data?.data.length === 0}>
        <ul className="table-list" aria-label="Tables">
          {tables.data?.data.map((t) => (
            <li key={t.name}>
              <button type="button" aria-pressed={t.name === table} onClick={() => { setTable(t.name); setOffset(0); }}>
                {t.name} <span className="muted" data-rows={t.row_count}>{rowCount(t)}</span>
              </button>
            </li>
          ))}
        </ul>
      </DataState>
      <div>
        {table && info ? (
          <DataState loading={rows.isLoading} error={rows.error} empty={rows.data?.data.length === 0} emptyText={`${table} is empty.`}>
            <div className="scroll">
              <table className="table" aria-label={`Rows of ${table}`}>
                <thead>
                  <tr>
                    {info.columns.map((c) => (
                      <th key={c.name} scope="col" title={c.type}>{c.name}</th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {rows.data?.data.map((row, i) => (
                    <tr key={i}>
                      {info.columns.map((c) => (
                        <td key={c.name} className="mono small">{cell(row[c.name])}</td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <Pager offset={offset} limit={25} total={rows.data?.meta.total} hasMore={rows.data?.meta.has_more ?? false} onChange={setOffset} label={`rows of ${table}`} />
          </DataState>
        ) : (
          <p className="muted">Pick a table to browse its rows (read-only).</p>
        )}
      </div>
    </div>
  );
}

/** "3 rows" when counted, "~120,000 rows" from the planner's estimate beyond the bound. */
export function rowCount(t: { row_count: number; row_count_exact: boolean }): string {
  const n = t.row_count.toLocaleString("en");
  const noun = t.row_count === 1 ? "row" : "rows";
  return t.row_count_exact ? `${n} ${noun}` : `~${n} ${noun}`;
}
