import { type FormEvent, useState } from "react";
import { useSearchParams } from "react-router-dom";

import { DataState, ErrorBox } from "../components/DataState";
import { StatusBadge } from "../components/Status";
import { useButlers, useOAuthCredentials, useOAuthStatus, useSecrets } from "../hooks/useApi";
import {
  useDeleteOAuthCredentials,
  useDeleteSecret,
  usePutOAuthCredentials,
  usePutSecret,
  useRotateSecrets,
} from "../hooks/useMutations";
import { ago } from "../lib/format";

const WRITABLE = new Set(["store", "shared"]);

/** Secrets are write-only: this page shows what is set, never a value. */
export function SecretsPage() {
  const [store, setStore] = useState("shared");
  const butlers = useButlers();
  const names = ["shared", ...(butlers.data?.data ?? []).map((b) => b.name)];
  return (
    <section>
      <h1>Secrets</h1>
      <p className="muted">
        Credentials sealed with the secrets key. A butler reads its own store first, then the shared store,
        then its environment; a module picks up a new value when its butler restarts.
      </p>
      <div className="toolbar">
        <label className="field">
          <span>Store</span>
          <select value={store} onChange={(e) => setStore(e.target.value)} aria-label="Store">
            {names.map((n) => (
              <option key={n} value={n}>
                {n === "shared" ? "shared (every butler)" : n}
              </option>
            ))}
          </select>
        </label>
      </div>
      <SecretTable store={store} />
      <SecretEditor store={store} />
      <Rotate />
      <GoogleSection />
    </section>
  );
}

function SecretTable({ store }: { store: string }) {
  const secrets = useSecrets(store);
  const remove = useDeleteSecret(store);
  const removeShared = useDeleteSecret("shared");
  return (
    <DataState loading={secrets.isLoading} error={secrets.error} empty={secrets.data?.length === 0} emptyText="No secrets in this store yet.">
      {remove.error ? <ErrorBox error={remove.error} /> : null}
      <table className="table" aria-label="Secrets">
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Category</th>
            <th scope="col">Description</th>
            <th scope="col">Source</th>
            <th scope="col">Set</th>
            <th scope="col">Updated</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {secrets.data?.map((s) => (
            <tr key={`${s.source}:${s.key}`} data-key={s.key}>
              <td className="mono">{s.key}</td>
              <td>{s.category}</td>
              <td>{s.description || "—"}</td>
              <td>{s.source}</td>
              <td>
                <StatusBadge status={s.is_set === null ? "unknown" : s.is_set ? "ok" : "error"} label={s.is_set === null ? "unknown" : s.is_set ? "set" : "not set"} />
              </td>
              <td>{s.updated_at ? `${ago(s.updated_at)}${s.updated_by ? ` by ${s.updated_by}` : ""}` : "—"}</td>
              <td>
                {WRITABLE.has(s.source) && (s.source === "shared") === (store === "shared") ? (
                  <button
                    type="button"
                    aria-label={`Delete ${s.key}`}
                    onClick={() => {
                      if (window.confirm(`Delete ${s.key}?`)) (s.source === "shared" ? removeShared : remove).mutate(s.key);
                    }}
                  >
                    Delete
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </DataState>
  );
}

function SecretEditor({ store }: { store: string }) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [category, setCategory] = useState("");
  const [description, setDescription] = useState("");
  const put = usePutSecret(store);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const body = {
      value: value || null,
      category: category || null,
      description: description || null,
    };
    put.mutate({ key, body }, { onSuccess: () => { setValue(""); } });
  };
  return (
    <form className="editor" onSubmit={submit} aria-label="Set a secret">
      <h2>Set a secret in {store}</h2>
      <label className="field">
        <span>Key</span>
        <input value={key} onChange={(e) => setKey(e.target.value)} placeholder="TELEGRAM_BOT_TOKEN" required />
      </label>
      <label className="field">
        <span>Value (write-only; empty keeps it)</span>
        <input type="password" autoComplete="off" value={value} onChange={(e) => setValue(e.target.value)} />
      </label>
      <label className="field">
        <span>Category</span>
        <input value={category} onChange={(e) => setCategory(e.target.value)} placeholder="general" />
      </label>
      <label className="field wide">
        <span>Description</span>
        <input value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>
      <button type="submit" disabled={put.isPending}>Save</button>
      {put.isSuccess ? <span role="status"> Saved {put.data.data.key}.</span> : null}
      {put.error ? <ErrorBox error={put.error} /> : null}
    </form>
  );
}

function Rotate() {
  const rotate = useRotateSecrets();
  const result = rotate.data?.data;
  return (
    <div className="editor">
      <h2>Key rotation</h2>
      <p className="muted">
        After putting a new key first in the keyring (BUTLERS_SECRETS_KEY, or the key file), re-seal every stored value
        with it; drop the old key once nothing failed.
      </p>
      <button type="button" onClick={() => rotate.mutate()} disabled={rotate.isPending}>Re-encrypt every store</button>
      {result ? (
        <p role="status">
          Key {result.key_id}: {Object.entries(result.reencrypted).map(([s, n]) => `${s} ${n}`).join(", ")}
          {Object.keys(result.failed).length ? ` — failed: ${Object.entries(result.failed).map(([s, why]) => `${s} (${why})`).join(", ")}` : ""}
        </p>
      ) : null}
      {rotate.error ? <ErrorBox error={rotate.error} /> : null}
    </div>
  );
}

function GoogleSection() {
  const [params] = useSearchParams();
  const status = useOAuthStatus();
  const creds = useOAuthCredentials();
  const save = usePutOAuthCredentials();
  const forget = useDeleteOAuthCredentials();
  const [clientId, setClientId] = useState("");
  const [clientSecret, setClientSecret] = useState("");
  const s = status.data?.data;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate({ client_id: clientId, client_secret: clientSecret }, { onSuccess: () => setClientSecret("") });
  };
  return (
    <div className="editor" aria-label="Google">
      <h2>Google (Calendar)</h2>
      {params.get("oauth") === "connected" ? <p role="status">Google connected.</p> : null}
      {params.get("oauth") === "error" ? <p className="error-box" role="alert">Google did not connect: see the status below.</p> : null}
      <DataState loading={status.isLoading} error={status.error}>
        {s ? (
          <div>
            <p>
              <StatusBadge status={s.connected ? "ok" : "error"} label={s.state} /> {s.remediation}
            </p>
            {s.detail ? <p className="muted">{s.detail}</p> : null}
            <p className="muted">
              Redirect URI to register: <span className="mono">{s.redirect_uri}</span>
            </p>
          </div>
        ) : null}
      </DataState>
      <form onSubmit={submit} aria-label="Google OAuth client">
        <label className="field">
          <span>Client id {creds.data?.data.client_id_set ? "(stored)" : ""}</span>
          <input value={clientId} onChange={(e) => setClientId(e.target.value)} required />
        </label>
        <label className="field">
          <span>Client secret {creds.data?.data.client_secret_set ? "(stored)" : ""}</span>
          <input type="password" autoComplete="off" value={clientSecret} onChange={(e) => setClientSecret(e.target.value)} required />
        </label>
        <button type="submit" disabled={save.isPending}>Store client</button>
      </form>
      {save.error ? <ErrorBox error={save.error} /> : null}
      <p>
        {creds.data?.data.client_id_set ? <a href="/api/oauth/google/start">Connect Google</a> : null}{" "}
        {creds.data?.data.client_id_set ? (
          <button type="button" onClick={() => { if (window.confirm("Forget the Google client and grant?")) forget.mutate(); }}>
            Disconnect
          </button>
        ) : null}
      </p>
      {forget.error ? <ErrorBox error={forget.error} /> : null}
    </div>
  );
}
