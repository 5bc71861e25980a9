import type { ReactNode } from "react";

import { ApiError } from "../api/client";

/** Loading / error / empty / content, with the API's error code and message shown. */
export function DataState({
  loading,
  error,
  empty,
  emptyText = "Nothing here yet.",
  children,
}: {
  loading: boolean;
  error: unknown;
  empty?: boolean;
  emptyText?: string;
  children: ReactNode;
}) {
  if (error) return <ErrorBox error={error} />;
  if (loading) return <p className="muted" role="status">Loading…</p>;
  if (empty) return <p className="muted">{emptyText}</p>;
  return <>{children}</>;
}

export function ErrorBox({ error }: { error: unknown }) {
  if (error instanceof ApiError) {
    return (
      <div className="error-box" role="alert">
        <strong>{error.code}</strong> ({error.status || "no answer"}): {error.message}
        {error.butler ? <span> — butler {error.butler}</span> : null}
      </div>
    );
  }
  return (
    <div className="error-box" role="alert">
      {error instanceof Error ? error.message : String(error)}
    </div>
  );
}

export function FailedButlers({ names }: { names: string[] | undefined }) {
  if (!names || names.length === 0) return null;
  return (
    <p className="warn-box" role="status">
      Not all butlers answered; missing: {names.join(", ")}.
    </p>
  );
}
