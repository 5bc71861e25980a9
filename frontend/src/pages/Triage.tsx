import { useState, type FormEvent } from "react";

import type { TriageRule, TriageRuleCreate } from "../api/types";
import { DataState, ErrorBox } from "../components/DataState";
import {
  useCreateTriageRule,
  useDeleteThreadAffinityOverride,
  useDeleteTriageRule,
  useTestTriageRule,
  useThreadAffinitySettings,
  useTriageRules,
  useUpdateThreadAffinitySettings,
  useUpdateTriageRule,
  useUpsertThreadAffinityOverride,
} from "../hooks/useTriage";
import { when } from "../lib/format";

type Condition = "sender" | "domain" | "subject" | "list_id" | "mailing_list";
const CONDITIONS: Condition[] = ["sender", "domain", "subject", "list_id", "mailing_list"];

function describeMatch(match: TriageRule["match"]): string {
  return Object.entries(match)
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([key, value]) => `${key}: ${String(value)}`)
    .join(" · ");
}

function RuleRow({ rule }: { rule: TriageRule }) {
  const update = useUpdateTriageRule();
  const remove = useDeleteTriageRule();
  return (
    <tr data-rule={rule.name}>
      <td>{rule.priority}</td>
      <td>{rule.name}</td>
      <td>{rule.channel}</td>
      <td className="mono">{describeMatch(rule.match)}</td>
      <td>{rule.action === "route" ? `route → ${rule.butler}` : rule.action}</td>
      <td>
        <button
          type="button"
          disabled={update.isPending}
          aria-label={`${rule.enabled ? "Disable" : "Enable"} rule ${rule.name}`}
          onClick={() => update.mutate({ id: rule.id, body: { enabled: !rule.enabled } })}
        >
          {rule.enabled ? "on" : "off"}
        </button>
      </td>
      <td>
        <button type="button" disabled={remove.isPending} aria-label={`Delete rule ${rule.name}`} onClick={() => remove.mutate(rule.id)}>
          Delete
        </button>
        {update.error ? <ErrorBox error={update.error} /> : null}
        {remove.error ? <ErrorBox error={remove.error} /> : null}
      </td>
    </tr>
  );
}

function NewRule() {
  const create = useCreateTriageRule();
  const [name, setName] = useState("");
  const [condition, setCondition] = useState<Condition>("domain");
  const [value, setValue] = useState("");
  const [action, setAction] = useState<TriageRuleCreate["action"]>("route");
  const [butler, setButler] = useState("");
  const [priority, setPriority] = useState(100);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const match = { [condition]: condition === "mailing_list" ? value !== "false" : value };
    create.mutate(
      { name, match, action, priority, channel: "email", enabled: true, butler: action === "route" ? butler : null },
      { onSuccess: () => { setName(""); setValue(""); } },
    );
  };
  return (
    <form className="toolbar" onSubmit={submit} aria-label="New triage rule">
      <label className="field"><span>Name</span><input required value={name} onChange={(e) => setName(e.target.value)} /></label>
      <label className="field">
        <span>When</span>
        <select value={condition} onChange={(e) => setCondition(e.target.value as Condition)}>
          {CONDITIONS.map((c) => <option key={c} value={c}>{c}</option>)}
        </select>
      </label>
      <label className="field"><span>is / contains</span><input required value={value} onChange={(e) => setValue(e.target.value)} placeholder={condition === "mailing_list" ? "true" : ""} /></label>
      <label className="field">
        <span>Then</span>
        <select value={action} onChange={(e) => setAction(e.target.value as TriageRuleCreate["action"])}>
          <option value="route">route</option>
          <option value="ignore">ignore</option>
          <option value="classify">classify</option>
        </select>
      </label>
      {action === "route" ? (
        <label className="field"><span>Butler</span><input required value={butler} onChange={(e) => setButler(e.target.value)} /></label>
      ) : null}
      <label className="field"><span>Priority</span><input type="number" min={0} max={100000} value={priority} onChange={(e) => setPriority(Number(e.target.value))} /></label>
      <button type="submit" disabled={create.isPending}>Add rule</button>
      {create.error ? <ErrorBox error={create.error} /> : null}
    </form>
  );
}

function DryRun() {
  const test = useTestTriageRule();
  const [sender, setSender] = useState("");
  const [subject, setSubject] = useState("");
  const [listId, setListId] = useState("");
  const [thread, setThread] = useState("");
  const submit = (event: FormEvent) => {
    event.preventDefault();
    test.mutate({
      sender,
      subject,
      channel: "email",
      list_id: listId,
      list_unsubscribe: "",
      precedence: "",
      thread_id: thread || null,
    });
  };
  const result = test.data?.data;
  return (
    <form className="toolbar" onSubmit={submit} aria-label="Try a message">
      <label className="field"><span>Sender</span><input required value={sender} onChange={(e) => setSender(e.target.value)} /></label>
      <label className="field"><span>Subject</span><input value={subject} onChange={(e) => setSubject(e.target.value)} /></label>
      <label className="field"><span>List-Id</span><input value={listId} onChange={(e) => setListId(e.target.value)} /></label>
      <label className="field"><span>Thread id</span><input value={thread} onChange={(e) => setThread(e.target.value)} /></label>
      <button type="submit" disabled={test.isPending}>Try</button>
      {result ? (
        <output aria-label="Dry run result">
          <strong>{result.action}</strong>{result.butler ? ` → ${result.butler}` : ""} <span className="muted">{result.reason}</span>
        </output>
      ) : null}
      {test.error ? <ErrorBox error={test.error} /> : null}
    </form>
  );
}

function Affinity() {
  const settings = useThreadAffinitySettings();
  const configure = useUpdateThreadAffinitySettings();
  const pin = useUpsertThreadAffinityOverride();
  const unpin = useDeleteThreadAffinityOverride();
  const [thread, setThread] = useState("");
  const [butler, setButler] = useState("");
  const data = settings.data?.data;
  return (
    <DataState loading={settings.isLoading} error={settings.error}>
      {data ? (
        <>
          <div className="toolbar">
            <label className="field">
              <span>Thread affinity</span>
              <input type="checkbox" checked={data.enabled} onChange={(e) => configure.mutate({ enabled: e.target.checked })} aria-label="Thread affinity enabled" />
            </label>
            <label className="field">
              <span>Remember threads (days)</span>
              <input type="number" min={1} max={3650} defaultValue={data.ttl_days} onBlur={(e) => configure.mutate({ ttl_days: Number(e.target.value) })} />
            </label>
            {configure.error ? <ErrorBox error={configure.error} /> : null}
          </div>
          <form
            className="toolbar"
            aria-label="Pin a thread"
            onSubmit={(event) => { event.preventDefault(); pin.mutate({ threadId: thread, butler }, { onSuccess: () => setThread("") }); }}
          >
            <label className="field"><span>Thread id</span><input required value={thread} onChange={(e) => setThread(e.target.value)} /></label>
            <label className="field"><span>Butler</span><input required value={butler} onChange={(e) => setButler(e.target.value)} /></label>
            <button type="submit" disabled={pin.isPending}>Pin</button>
            {pin.error ? <ErrorBox error={pin.error} /> : null}
          </form>
          <table className="table" aria-label="Pinned threads">
            <thead><tr><th scope="col">Thread</th><th scope="col">Butler</th><th scope="col">Since</th><th scope="col" /></tr></thead>
            <tbody>
              {data.overrides.map((o) => (
                <tr key={`${o.channel}:${o.thread_id}`}>
                  <td className="mono">{o.thread_id}</td>
                  <td>{o.butler}</td>
                  <td>{when(o.updated_at)}</td>
                  <td><button type="button" aria-label={`Unpin ${o.thread_id}`} onClick={() => unpin.mutate(o.thread_id)}>Unpin</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : null}
    </DataState>
  );
}

export function TriagePage() {
  const rules = useTriageRules();
  return (
    <section>
      <h1>Triage</h1>
      <p className="muted">
        What the switchboard does with an e-mail before the classifier sees it: the first matching rule (lowest priority first) ignores it, routes it to a butler, or leaves it to the classifier.
      </p>
      <DataState loading={rules.isLoading} error={rules.error} empty={rules.data?.data.length === 0} emptyText="No triage rules: every e-mail is classified.">
        <table className="table" aria-label="Triage rules">
          <thead>
            <tr>
              <th scope="col">Priority</th><th scope="col">Name</th><th scope="col">Channel</th><th scope="col">Match</th><th scope="col">Action</th><th scope="col">Enabled</th><th scope="col" />
            </tr>
          </thead>
          <tbody>{rules.data?.data.map((rule) => <RuleRow key={rule.id} rule={rule} />)}</tbody>
        </table>
      </DataState>
      <h2>New rule</h2>
      <NewRule />
      <h2>Try a message</h2>
      <DryRun />
      <h2>Thread affinity</h2>
      <p className="muted">A reply in an e-mail thread goes to the butler that handled the thread, or to the one you pinned it to.</p>
      <Affinity />
    </section>
  );
}
