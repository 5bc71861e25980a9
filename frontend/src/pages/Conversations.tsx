import { useState, type FormEvent } from "react";
import { Link } from "react-router-dom";

import type { ConnectorHealth, Conversation, ConversationRoute } from "../api/types";
import { DataState, ErrorBox, FailedButlers } from "../components/DataState";
import { StatusBadge } from "../components/Status";
import {
  useConnectors,
  useConversations,
  useDropMessage,
  useReleaseMessage,
  useSendAsOwner,
} from "../hooks/useConversations";
import { ago, duration, shortId, when } from "../lib/format";

const CHANNELS = ["", "telegram", "email", "dashboard", "api", "cli"] as const;

function RouteLine({ route }: { route: ConversationRoute }) {
  return (
    <li data-route={route.butler}>
      <strong>{route.butler}</strong> <StatusBadge status={route.status} /> {duration(route.duration_ms)}
      {route.session_id ? (
        <>
          {" · session "}
          <Link
            to={`/butlers/${encodeURIComponent(route.butler)}/sessions/${route.session_id}`}
            aria-label={`Session ${shortId(route.session_id)} on ${route.butler}`}
          >
            {shortId(route.session_id)}
          </Link>
          {route.session_status ? <> ({route.session_status})</> : null}
        </>
      ) : null}
      {route.tool_calls.length ? (
        <span className="mono small"> · tools: {route.tool_calls.join(", ")}</span>
      ) : null}
      {route.error ? <p className="reason">{route.error}</p> : null}
    </li>
  );
}

function Quarantined({ message }: { message: Conversation }) {
  const release = useReleaseMessage();
  const drop = useDropMessage();
  const busy = release.isPending || drop.isPending;
  return (
    <div className="warn-box" role="group" aria-label={`Quarantined message from ${message.sender}`}>
      <p>Quarantined: {message.quarantine_reason}</p>
      <button type="button" disabled={busy} onClick={() => release.mutate(message.request_id)}>
        Release
      </button>{" "}
      <button type="button" disabled={busy} onClick={() => drop.mutate(message.request_id)}>
        Drop
      </button>
      {release.error ? <ErrorBox error={release.error} /> : null}
      {drop.error ? <ErrorBox error={drop.error} /> : null}
    </div>
  );
}

function Reply({ message }: { message: Conversation }) {
  const reply = message.reply;
  if (!reply.text && !reply.state) return null;
  return (
    <div className="reply" aria-label={`Reply to ${message.sender}`}>
      <p>
        <strong>Reply</strong> {reply.state ? <StatusBadge status={reply.state} label={`reply ${reply.state}`} /> : null}
        {reply.attempts > 1 ? <span className="muted"> after {reply.attempts} attempts</span> : null}
        {reply.delivery_id ? <span className="mono small"> delivery {shortId(reply.delivery_id)}</span> : null}
      </p>
      {reply.text ? <blockquote className="reply-text">{reply.text}</blockquote> : null}
      {reply.error ? <p className="reason">{reply.error}</p> : null}
    </div>
  );
}

function MessageView({ message }: { message: Conversation }) {
  const plan = message.triage
    ? `triage: ${String(message.triage.reason ?? message.triage.action ?? "")}`
    : message.fallback
      ? `fallback to general: ${message.classification_reason ?? ""}`
      : message.routes.length
        ? `classified to ${message.routes.map((r) => r.butler).join(", ")}`
        : null;
  return (
    <article className="card conversation" data-request={message.request_id} aria-label={`Message from ${message.sender}`}>
      <header>
        <h2>
          <span className="chip">{message.channel}</span> {message.sender}
        </h2>
        <StatusBadge status={message.status} />
      </header>
      <p className="muted small">
        <time title={when(message.received_at)}>{ago(message.received_at)}</time>
        {message.trace_id ? (
          <>
            {" · "}
            <Link to={`/traces/${message.trace_id}`}>trace</Link>
          </>
        ) : null}
      </p>
      <blockquote className="message-text">{message.text}</blockquote>
      {message.status === "quarantined" ? <Quarantined message={message} /> : null}
      {plan ? <p className="muted">{plan}</p> : null}
      {message.error ? <p className="reason">{message.error}</p> : null}
      {message.routes.length ? (
        <ul className="routes" aria-label="Routes">
          {message.routes.map((r) => (
            <RouteLine key={r.route_id} route={r} />
          ))}
        </ul>
      ) : null}
      <Reply message={message} />
    </article>
  );
}

function SendBox() {
  const send = useSendAsOwner();
  const [text, setText] = useState("");
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!text.trim()) return;
    send.mutate(text, { onSuccess: () => setText("") });
  };
  return (
    <form className="toolbar" onSubmit={submit} aria-label="Write as the owner">
      <label className="field grow">
        <span>Write to your butlers (as the owner)</span>
        <textarea required rows={2} maxLength={20000} value={text} onChange={(e) => setText(e.target.value)} />
      </label>
      <button type="submit" disabled={send.isPending}>
        Send
      </button>
      {send.error ? <ErrorBox error={send.error} /> : null}
    </form>
  );
}

export function ConnectorList({ connectors }: { connectors: ConnectorHealth[] }) {
  if (!connectors.length) return <p className="muted">No inbound connector runs (set `inbound: true` on a channel module).</p>;
  return (
    <table aria-label="Connectors">
      <thead>
        <tr>
          <th>Connector</th>
          <th>State</th>
          <th>Mode</th>
          <th>Cursor</th>
          <th>Backlog</th>
          <th>Handed over</th>
          <th>Errors</th>
          <th>Last poll</th>
          <th>Last error</th>
        </tr>
      </thead>
      <tbody>
        {connectors.map((c) => (
          <tr key={`${c.butler}-${c.channel}-${c.name}`} data-connector={c.channel}>
            <td>
              {c.channel} {c.name} <span className="muted">on {c.butler}</span>
            </td>
            <td>
              <StatusBadge status={c.state} label={`${c.channel} ${c.state}`} />
              {c.reason ? <span className="small"> {c.reason}</span> : null}
            </td>
            <td>{c.mode}</td>
            <td className="mono small">{c.cursor}</td>
            <td>{c.backlog}</td>
            <td>{c.handed_over}</td>
            <td>{c.errors}</td>
            <td>{ago(c.last_poll_at)}</td>
            <td className="small">{c.last_error ? `${c.last_error} (${ago(c.last_error_at)})` : "none"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ConversationsPage() {
  const [channel, setChannel] = useState("");
  const [quarantinedOnly, setQuarantinedOnly] = useState(false);
  const list = useConversations({
    limit: 50,
    channel: channel || undefined,
    status: quarantinedOnly ? "quarantined" : undefined,
  });
  const connectors = useConnectors();
  const messages = list.data?.data ?? [];
  return (
    <section>
      <h1>Conversations</h1>
      <SendBox />
      <div className="toolbar" role="group" aria-label="Filters">
        <label className="field">
          <span>Channel</span>
          <select value={channel} onChange={(e) => setChannel(e.target.value)}>
            {CHANNELS.map((c) => (
              <option key={c} value={c}>
                {c || "all"}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          <input type="checkbox" checked={quarantinedOnly} onChange={(e) => setQuarantinedOnly(e.target.checked)} />
          <span>Quarantined only</span>
        </label>
      </div>
      <DataState loading={list.isLoading} error={list.error} empty={!messages.length} emptyText="No messages yet.">
        <FailedButlers names={list.data?.meta?.failed_butlers} />
        <div className="conversations">
          {messages.map((m) => (
            <MessageView key={m.request_id} message={m} />
          ))}
        </div>
      </DataState>
      <h2>Connectors</h2>
      <DataState loading={connectors.isLoading} error={connectors.error}>
        <FailedButlers names={connectors.data?.meta?.failed_butlers} />
        <ConnectorList connectors={connectors.data?.data ?? []} />
      </DataState>
    </section>
  );
}
