// The API's enums as lists the UI can show. Each list is written as a record over the
// schema's union, so a value the API adds (or drops) and this file does not is a type
// error: the UI offers exactly what the API accepts.
import type { Query } from "./client";
import type { components } from "./schema";

type S = components["schemas"];

/** The members of a union of strings, from a record that must name each exactly once. */
export function membersOf<T extends string>(members: Record<T, unknown>): T[] {
  return Object.keys(members) as T[];
}

export type SessionStatus = S["SessionSummary"]["status"];
export const SESSION_STATUSES = membersOf<SessionStatus>({
  running: true,
  completed: true,
  error: true,
  interrupted: true,
  cancelled: true,
});

export type SessionKind = S["SessionSummary"]["kind"];
/** Each kind of session with the words the Sessions page uses for it. */
export const SESSION_KINDS: Record<SessionKind, string> = {
  message: "Messages",
  classification: "Classifier",
  scheduled: "Scheduled",
  manual: "Manual",
  maintenance: "Upkeep",
};

export type AuditOutcome = NonNullable<Query<"/api/audit-log">["status"]>;
export const AUDIT_OUTCOMES = membersOf<AuditOutcome>({ ok: true, error: true });

export type DeliveryStatus = NonNullable<Query<"/api/notifications">["status"]>;
export const DELIVERY_STATUSES = membersOf<DeliveryStatus>({
  sending: true,
  sent: true,
  failed: true,
  held: true,
  refused: true,
});

export type MetricRange = NonNullable<Query<"/api/metrics">["range"]>;
export const METRIC_RANGE_NAMES: Record<MetricRange, string> = {
  "24h": "24 hours",
  "7d": "7 days",
  "30d": "30 days",
  "90d": "90 days",
};
export const METRIC_RANGES = membersOf(METRIC_RANGE_NAMES);
export type MetricGroup = NonNullable<Query<"/api/metrics">["by"]>;
export const METRIC_GROUPS = membersOf<MetricGroup>({ butler: true, model: true });

export type CostPeriod = NonNullable<Query<"/api/costs/summary">["period"]>;
export const COST_PERIOD_NAMES: Record<CostPeriod, string> = {
  "24h": "24 hours",
  "7d": "7 days",
  "30d": "30 days",
  "90d": "90 days",
  all: "All time",
};
export const COST_PERIODS = membersOf(COST_PERIOD_NAMES);

export type FactValidity = NonNullable<Query<"/api/memory/facts">["validity"]>;
export const FACT_VALIDITIES = membersOf<FactValidity>({
  active: true,
  superseded: true,
  faded: true,
  retracted: true,
});

export type Provenance = NonNullable<Query<"/api/memory/facts">["provenance"]>;
export const PROVENANCES = membersOf<Provenance>({ owner: true, butler: true, untrusted: true });
