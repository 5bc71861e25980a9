import { useEffect, useState } from "react";
import { Link, useLocation } from "react-router-dom";

import type { ApprovalAction } from "../api/types";
import { DataState, ErrorBox } from "../components/DataState";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/Status";
import { sessionPath } from "../components/SessionTable";
import { useApprovalActions, useApprovalMetrics, useApprovalRules, useExecutedActions } from "../hooks/useApi";
import { useDecideApproval, useExpireStale } from "../hooks/useMutations";
import { offsetOf, useUrlState } from "../hooks/useUrlState";
import { ago, countdown, json, when } from "../lib/format";

function useNow(periodMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = window.setInterval(() => setNow(Date.now()), periodMs);
    return () => window.clearInterval(timer);
  }, [periodMs]);
  return now;
}

/** The element id of a pending approval on this page (`/approvals#…` scrolls to it). */
export function approvalAnchor(id: string): string {
  return `approval-${id}`;
}

/** Who asked for a held call: a butler's session (linked), this dashboard, or a client. */
export function Requester({ action }: { action: ApprovalAction }) {
  if (action.requested_by === "session" && action.session_id) {
    return (
      <>
        {" "}by <Link to={sessionPath({ butler: action.butler, id: action.session_id })}>session {action.session_id.slice(0, 8)}</Link>
      </>
    );
  }
  if (action.requested_by === "dashboard") return <> from this dashboard&apos;s tool form</>;
  if (action.requested_by === "client") {
    return <> by an MCP client <span className="mono muted">(MCP session {action.client_session?.slice(0, 8)})</span></>;
  }
  return null;
}

export function PendingAction({ action, now }: { action: ApprovalAction; now: number }) {
  const [reason, setReason] = useState("");
  const decide = useDecideApproval();
  const left = Math.round((Date.parse(action.expires_at) - now) / 1000);
  const label = `${action.tool_name} on ${action.butler}`;
  return (
    <li className="approval" data-action={action.id} id={approvalAnchor(action.id)}>
      <header>
        <strong className="mono">{action.tool_name}</strong> on <strong>{action.butler}</strong>{" "}
        <StatusBadge status={action.status} />{" "}
        <span className={left < 60 ? "countdown urgent" : "countdown"} aria-label={`Time left: ${countdown(left)}`}>
          {countdown(left)}
        </span>
      </header>
      <p className="muted">
        Requested {ago(action.requested_at, now)}
        <Requester action={action} />
      </p>
      <pre aria-label={`Arguments of ${label}`}>{json(action.tool_args)}</pre>
      <div className="decision">
        <label className="field">
          <span>Reason (optional)</span>
          <input value={reason} onChange={(e) => setReason(e.target.value)} aria-label={`Reason for ${label}`} />
        </label>
        <button
          type="button"
          className="approve"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ id: action.id, decision: "approve", reason })}
          aria-label={`Approve ${label}`}
        >
          Approve
        </button>
        <button
          type="button"
          className="deny"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ id: action.id, decision: "reject", reason })}
          aria-label={`Deny ${label}`}
        >
          Deny
        </button>
      </div>
      {decide.error ? <ErrorBox error={decide.error} /> : null}
    </li>
  );
}

function Metrics() {
  const metrics = useApprovalMetrics();
  const m = metrics.data?.data;
  return (
    <DataState loading={metrics.isLoading} error={metrics.error}>
      {m ? (
        <dl className="totals" aria-label="Approval metrics">
          <div><dt>Pending</dt><dd>{m.pending}</dd></div>
          <div><dt>Approved</dt><dd>{m.approved}</dd></div>
          <div><dt>Denied</dt><dd>{m.denied}</dd></div>
          <div><dt>Expired</dt><dd>{m.expired}</dd></div>
          <div><dt>Approval rate</dt><dd>{m.approval_rate === null ? "—" : `${Math.round(m.approval_rate * 100)}%`}</dd></div>
          <div><dt>Median decision</dt><dd>{m.median_decision_seconds === null ? "—" : `${Math.round(m.median_decision_seconds)} s`}</dd></div>
        </dl>
      ) : null}
    </DataState>
  );
}

function History() {
  const [url, setUrl] = useUrlState({ offset: "0" });
  const offset = offsetOf(url.offset);
  const executed = useExecutedActions({ offset, limit: 20 });
  return (
    <DataState loading={executed.isLoading} error={executed.error} empty={executed.data?.data.length === 0} emptyText="No decisions yet.">
      <table className="table" aria-label="Decided approvals">
        <thead>
          <tr>
            <th scope="col">Tool</th>
            <th scope="col">Butler</th>
            <th scope="col">Status</th>
            <th scope="col">Decided by</th>
            <th scope="col">Reason</th>
            <th scope="col">Decided</th>
          </tr>
        </thead>
        <tbody>
          {executed.data?.data.map((a) => (
            <tr key={a.id}>
              <td className="mono">{a.tool_name}</td>
              <td>{a.butler}</td>
              <td><StatusBadge status={a.status} /></td>
              <td>{a.decided_by ?? "—"}</td>
              <td>{a.reason ?? ""}</td>
              <td>{when(a.decided_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager offset={offset} limit={20} total={executed.data?.meta.total} hasMore={executed.data?.meta.has_more ?? false} onChange={(o) => setUrl({ offset: String(o) })} label="decisions" />
    </DataState>
  );
}

function Rules() {
  const rules = useApprovalRules();
  return (
    <DataState loading={rules.isLoading} error={rules.error} empty={rules.data?.data.length === 0} emptyText="No approval rules.">
      <p className="muted">Rules come from each Butler's spec (spec.approvals) and are read-only here.</p>
      <table className="table" aria-label="Approval rules">
        <thead>
          <tr>
            <th scope="col">Butler</th>
            <th scope="col">Tool</th>
            <th scope="col">Mode</th>
            <th scope="col">Sensitive arguments</th>
            <th scope="col">Source</th>
          </tr>
        </thead>
        <tbody>
          {rules.data?.data.map((r) => (
            <tr key={r.id}>
              <td>{r.butler}</td>
              <td className="mono">{r.tool}</td>
              <td>{r.mode}</td>
              <td>{r.sensitive_args.join(", ") || "—"}</td>
              <td>{r.source}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </DataState>
  );
}

/** `/approvals#approval-…` (a held call's link) scrolls to that request once listed. */
function useScrollToHash(ready: boolean) {
  const { hash } = useLocation();
  useEffect(() => {
    if (!ready || !hash) return;
    const target = document.getElementById(decodeURIComponent(hash.slice(1)));
    if (target) {
      target.scrollIntoView({ block: "center" });
      target.classList.add("highlight");
    }
  }, [ready, hash]);
}

export function ApprovalsPage() {
  const pending = useApprovalActions({ limit: 100 });
  useScrollToHash(!!pending.data);
  const expire = useExpireStale();
  const now = useNow();
  return (
    <section>
      <h1>Approvals</h1>
      <Metrics />
      <h2>Waiting for a decision</h2>
      <DataState loading={pending.isLoading} error={pending.error} empty={pending.data?.data.length === 0} emptyText="Nothing waits for approval.">
        <ul className="approvals" aria-label="Pending approvals">
          {pending.data?.data.map((a) => (
            <PendingAction key={a.id} action={a} now={now} />
          ))}
        </ul>
      </DataState>
      <button type="button" onClick={() => expire.mutate()} disabled={expire.isPending}>
        Expire stale requests
      </button>
      {expire.data ? <span role="status"> {expiredCount(expire.data.data.expired)} expired.</span> : null}
      {expire.error ? <ErrorBox error={expire.error} /> : null}
      <h2>History</h2>
      <History />
      <h2>Rules</h2>
      <Rules />
    </section>
  );
}

/** How many requests an expire-stale pass expired, across butlers. */
export function expiredCount(expired: Record<string, string[]>): number {
  return Object.values(expired).reduce((n, ids) => n + ids.length, 0);
}
