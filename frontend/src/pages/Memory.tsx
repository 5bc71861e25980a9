import { useState } from "react";
import { Link } from "react-router-dom";

import { FACT_VALIDITIES, PROVENANCES } from "../api/enums";
import type { MemoryFact, MemoryFactDetail, MemoryRule } from "../api/types";
import { DataState, ErrorBox } from "../components/DataState";
import { Select } from "../components/Filters";
import { Pager } from "../components/Pager";
import { StatusBadge } from "../components/Status";
import { sessionPath } from "../components/SessionTable";
import { useConsolidations, useFact, useFacts, useMemoryStats, useRules } from "../hooks/useApi";
import { type MemoryCorrection, useConsolidateNow, useCorrectMemory, useShareFact } from "../hooks/useMutations";
import { offsetOf, oneOf, useUrlState, useUrlText } from "../hooks/useUrlState";
import { when } from "../lib/format";

const PAGE = 25;
// The fact list's filters and the fact shown, in the URL.
const FACT_FILTERS = { q: "", validity: "active", provenance: "", offset: "0", fact: "" };

function Provenance({ value }: { value: string }) {
  if (value === "untrusted") {
    return (
      <span className="badge warn" title="From content the owner did not write: a claim, not a fact">
        ▲ untrusted
      </span>
    );
  }
  return <span className="muted">{value}</span>;
}

function Stats() {
  const stats = useMemoryStats();
  const s = stats.data?.data;
  return (
    <DataState loading={stats.isLoading} error={stats.error}>
      {s ? (
        <dl className="totals" aria-label="Memory totals">
          <div><dt>Active facts</dt><dd>{s.active_facts}</dd></div>
          <div><dt>Untrusted facts</dt><dd>{s.untrusted_facts}</dd></div>
          <div><dt>All facts</dt><dd>{s.facts}</dd></div>
          <div><dt>Rules</dt><dd>{s.rules}</dd></div>
          <div><dt>Episodes</dt><dd>{s.episodes}</dd></div>
          <div><dt>Awaiting consolidation</dt><dd>{s.unconsolidated_episodes}</dd></div>
          <div><dt>Butlers with memory</dt><dd>{Object.keys(s.by_butler).sort().join(", ") || "none"}</dd></div>
        </dl>
      ) : null}
    </DataState>
  );
}

function Corrections({ kind, id, validity, label }: { kind: "facts" | "rules"; id: string; validity: string; label: string }) {
  const correct = useCorrectMemory();
  const actions: [MemoryCorrection, string][] =
    validity === "retracted" ? [["restore", "Restore"]] : validity === "active" ? [["confirm", "Confirm"], ["retract", "Retract"]] : [];
  return (
    <span className="actions">
      {actions.map(([action, text]) => (
        <button
          key={action}
          type="button"
          disabled={correct.isPending}
          onClick={() => correct.mutate({ kind, id, action })}
          aria-label={`${text} ${label}`}
        >
          {text}
        </button>
      ))}
      {correct.error ? <ErrorBox error={correct.error} /> : null}
    </span>
  );
}

function Sharing({ fact }: { fact: MemoryFactDetail }) {
  const stats = useMemoryStats();
  const share = useShareFact();
  const others = Object.keys(stats.data?.data.by_butler ?? {}).filter((b) => b !== fact.butler).sort();
  if (fact.shared_from) {
    return <p className="muted">Shared by the {fact.shared_from} butler (its fact {fact.shared_id?.slice(0, 8)}).</p>;
  }
  const toggle = (name: string, on: boolean) => {
    const next = on ? [...fact.shared_with, name] : fact.shared_with.filter((b) => b !== name);
    share.mutate({ id: fact.id, butlers: next });
  };
  return (
    <fieldset aria-label="Share with">
      <legend>Share with</legend>
      {others.length === 0 ? <span className="muted">No other butler has memory.</span> : null}
      {others.map((name) => (
        <label key={name} className="check">
          <input
            type="checkbox"
            checked={fact.shared_with.includes(name)}
            disabled={share.isPending || (fact.validity !== "active" && !fact.shared_with.includes(name))}
            onChange={(e) => toggle(name, e.target.checked)}
            aria-label={`Share with ${name}`}
          />
          {name}
        </label>
      ))}
      {share.error ? <ErrorBox error={share.error} /> : null}
    </fieldset>
  );
}

function factText(f: { subject: string; predicate: string; content: string }): string {
  return `${f.subject} · ${f.predicate} · ${f.content}`;
}

function FactDetail({ id, onClose }: { id: string; onClose: () => void }) {
  const detail = useFact(id);
  const f: MemoryFactDetail | undefined = detail.data?.data;
  return (
    <aside className="panel" aria-label="Fact detail">
      <button type="button" onClick={onClose} aria-label="Close fact detail">Close</button>
      <DataState loading={detail.isLoading} error={detail.error}>
        {f ? (
          <>
            <h3>{factText(f)}</h3>
            <dl className="kv">
              <dt>Butler</dt><dd>{f.butler}</dd>
              <dt>Validity</dt><dd><StatusBadge status={f.validity} /></dd>
              <dt>Provenance</dt><dd><Provenance value={f.provenance} /></dd>
              <dt>Source</dt>
              <dd>
                {f.source_session ? (
                  <Link to={sessionPath({ butler: f.butler, id: f.source_session })}>session {f.source_session.slice(0, 8)}</Link>
                ) : null}
                {f.source_channel ? ` via ${f.source_channel}` : null}
                {f.source_message ? ` (message ${f.source_message})` : null}
                {!f.source_session && !f.source_channel ? "stated through a tool" : null}
              </dd>
              <dt>Confidence</dt><dd>{f.confidence.toFixed(2)} ({f.permanence})</dd>
              <dt>Importance</dt><dd>{f.importance.toFixed(2)}</dd>
              <dt>Tags</dt><dd>{f.tags.join(", ") || "—"}</dd>
              <dt>Last used</dt><dd>{when(f.last_used_at)}</dd>
            </dl>
            <Corrections kind="facts" id={f.id} validity={f.validity} label={factText(f)} />
            <Sharing fact={f} />
            <h4>History</h4>
            <ol aria-label="Fact history">
              {f.history.map((h) => (
                <li key={h.id}>
                  <StatusBadge status={h.validity} /> {h.content} <span className="muted">({when(h.created_at)})</span>
                </li>
              ))}
            </ol>
          </>
        ) : null}
      </DataState>
    </aside>
  );
}

function Facts() {
  const [url, setUrl] = useUrlState(FACT_FILTERS);
  const validity = oneOf(url.validity, FACT_VALIDITIES);
  const provenance = oneOf(url.provenance, PROVENANCES);
  const offset = offsetOf(url.offset);
  const selected = url.fact || null;
  const [q, setQ] = useUrlText(url.q, (text) => setUrl({ q: text }, { replace: true }));
  const facts = useFacts({ q: url.q || undefined, validity: validity || undefined, provenance: provenance || undefined, offset, limit: PAGE });
  return (
    <>
      <div className="filters">
        <label className="field">
          <span>Search facts</span>
          <input value={q} onChange={(e) => setQ(e.target.value)} aria-label="Search facts" />
        </label>
        <Select label="Validity" value={validity} options={FACT_VALIDITIES} onChange={(v) => setUrl({ validity: v })} />
        <Select label="Provenance" value={provenance} options={PROVENANCES} onChange={(v) => setUrl({ provenance: v })} />
      </div>
      <DataState loading={facts.isLoading} error={facts.error} empty={facts.data?.data.length === 0} emptyText="No facts match.">
        <table className="table" aria-label="Facts">
          <thead>
            <tr>
              <th scope="col">Fact</th>
              <th scope="col">Butler</th>
              <th scope="col">Provenance</th>
              <th scope="col">Validity</th>
              <th scope="col">Confidence</th>
              <th scope="col">Stored</th>
            </tr>
          </thead>
          <tbody>
            {facts.data?.data.map((f: MemoryFact) => (
              <tr key={f.id}>
                <td>
                  <button type="button" className="link" onClick={() => setUrl({ fact: f.id, offset: url.offset })}>{factText(f)}</button>
                </td>
                <td>{f.butler}</td>
                <td><Provenance value={f.provenance} /></td>
                <td><StatusBadge status={f.validity} /></td>
                <td>{f.confidence.toFixed(2)}</td>
                <td>{when(f.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={PAGE} total={facts.data?.meta.total} hasMore={facts.data?.meta.has_more ?? false} onChange={(o) => setUrl({ offset: String(o), fact: url.fact })} label="facts" />
      </DataState>
      {selected ? <FactDetail id={selected} onClose={() => setUrl({ fact: "", offset: url.offset })} /> : null}
    </>
  );
}

function Rules() {
  const [q, setQ] = useState("");
  const [offset, setOffset] = useState(0);
  const rules = useRules({ q: q || undefined, offset, limit: PAGE });
  return (
    <>
      <label className="field">
        <span>Search rules</span>
        <input value={q} onChange={(e) => { setQ(e.target.value); setOffset(0); }} aria-label="Search rules" />
      </label>
      <DataState loading={rules.isLoading} error={rules.error} empty={rules.data?.data.length === 0} emptyText="No rules learned yet.">
        <table className="table" aria-label="Rules">
          <thead>
            <tr>
              <th scope="col">Rule</th>
              <th scope="col">Butler</th>
              <th scope="col">Helpful / harmful</th>
              <th scope="col">Provenance</th>
              <th scope="col">Validity</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rules.data?.data.map((r: MemoryRule) => (
              <tr key={r.id}>
                <td>{r.content}</td>
                <td>{r.butler}</td>
                <td>{r.helpful} / {r.harmful}</td>
                <td><Provenance value={r.provenance} /></td>
                <td><StatusBadge status={r.validity} /></td>
                <td><Corrections kind="rules" id={r.id} validity={r.validity} label={r.content} /></td>
              </tr>
            ))}
          </tbody>
        </table>
        <Pager offset={offset} limit={PAGE} total={rules.data?.meta.total} hasMore={rules.data?.meta.has_more ?? false} onChange={setOffset} label="rules" />
      </DataState>
    </>
  );
}

function ConsolidateNow() {
  const stats = useMemoryStats();
  const run = useConsolidateNow();
  const butlers = Object.keys(stats.data?.data.by_butler ?? {}).sort();
  const [butler, setButler] = useState("");
  const chosen = butler || butlers[0] || "";
  const done = run.data?.data;
  return (
    <div className="filters">
      <label className="field">
        <span>Butler</span>
        <select value={chosen} onChange={(e) => setButler(e.target.value)} aria-label="Butler to consolidate">
          {butlers.map((name) => (
            <option key={name} value={name}>{name}</option>
          ))}
        </select>
      </label>
      <button type="button" disabled={!chosen || run.isPending} onClick={() => run.mutate(chosen)}>
        {run.isPending ? "Consolidating…" : "Consolidate now"}
      </button>
      {done ? (
        <span role="status">
          {done.butler}: {done.status}
          {done.reason ? ` (${done.reason})` : ""}, {done.episodes} episodes, {done.created} new facts
        </span>
      ) : null}
      {run.error ? <ErrorBox error={run.error} /> : null}
    </div>
  );
}

function Consolidations() {
  const [offset, setOffset] = useState(0);
  const runs = useConsolidations({ offset, limit: 10 });
  return (
    <>
    <ConsolidateNow />
    <DataState loading={runs.isLoading} error={runs.error} empty={runs.data?.data.length === 0} emptyText="No consolidation has run yet.">
      <table className="table" aria-label="Consolidation runs">
        <thead>
          <tr>
            <th scope="col">Started</th>
            <th scope="col">Butler</th>
            <th scope="col">Started by</th>
            <th scope="col">Status</th>
            <th scope="col">Episodes</th>
            <th scope="col">New / reinforced / superseding</th>
            <th scope="col">Faded / expired</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {runs.data?.data.map((r) => (
            <tr key={r.id}>
              <td>{when(r.started_at)}</td>
              <td>{r.butler}</td>
              <td>{r.trigger}</td>
              <td><StatusBadge status={r.status} /></td>
              <td>{r.episodes}</td>
              <td>{r.created} / {r.reinforced} / {r.superseded}</td>
              <td>{r.faded} / {r.expired}</td>
              <td>{r.error ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager offset={offset} limit={10} total={runs.data?.meta.total} hasMore={runs.data?.meta.has_more ?? false} onChange={setOffset} label="consolidation runs" />
    </DataState>
    </>
  );
}

export function MemoryPage() {
  return (
    <section>
      <h1>Memory</h1>
      <Stats />
      <h2>Facts</h2>
      <Facts />
      <h2>Rules</h2>
      <Rules />
      <h2>Consolidation runs</h2>
      <Consolidations />
    </section>
  );
}
