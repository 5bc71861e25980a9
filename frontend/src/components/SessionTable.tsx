import { Link } from "react-router-dom";

import { SESSION_KINDS } from "../api/enums";
import type { SessionSummary } from "../api/types";
import { ago, duration, money, shortId } from "../lib/format";
import { StatusBadge } from "./Status";

export function sessionPath(s: { butler: string; id: string }): string {
  return `/butlers/${encodeURIComponent(s.butler)}/sessions/${encodeURIComponent(s.id)}`;
}

export function SessionTable({ sessions, showButler = true }: { sessions: SessionSummary[]; showButler?: boolean }) {
  return (
    <table className="table" aria-label="Sessions">
      <thead>
        <tr>
          <th scope="col">Session</th>
          {showButler ? <th scope="col">Butler</th> : null}
          <th scope="col">Status</th>
          <th scope="col">Trigger</th>
          <th scope="col">Prompt</th>
          <th scope="col">Started</th>
          <th scope="col">Duration</th>
          <th scope="col">Tools</th>
          <th scope="col">Cost</th>
        </tr>
      </thead>
      <tbody>
        {sessions.map((s) => (
          <tr key={`${s.butler}-${s.id}`} data-session={s.id} data-kind={s.kind}>
            <td>
              <Link to={sessionPath(s)} className="mono" aria-label={`Session ${shortId(s.id)} of ${s.butler}`}>
                {shortId(s.id)}
              </Link>
            </td>
            {showButler ? <td>{s.butler}</td> : null}
            <td>
              <StatusBadge status={s.status} />
            </td>
            <td>
              <span className="chip" title={`kind: ${s.kind}`}>{SESSION_KINDS[s.kind]}</span> {s.trigger_source}
            </td>
            <td className="prompt">{s.prompt_preview}</td>
            <td>
              <time dateTime={s.started_at} title={s.started_at}>
                {ago(s.started_at)}
              </time>
            </td>
            <td>{duration(s.duration_ms)}</td>
            <td>{s.tool_call_count}</td>
            <td>{s.priced ? money(s.cost_usd) : "unpriced"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
