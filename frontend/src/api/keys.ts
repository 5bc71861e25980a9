// Query keys, hierarchical so one prefix invalidates a whole domain.
type Params = Record<string, unknown> | undefined;

export const approvalKeys = {
  all: ["approvals"] as const,
  actions: (params?: Params) => ["approvals", "actions", params ?? {}] as const,
  executed: (params?: Params) => ["approvals", "executed", params ?? {}] as const,
  action: (id: string) => ["approvals", "action", id] as const,
  rules: (params?: Params) => ["approvals", "rules", params ?? {}] as const,
  metrics: () => ["approvals", "metrics"] as const,
};

export const butlerKeys = {
  all: ["butlers"] as const,
  list: () => ["butlers", "list"] as const,
  detail: (name: string) => ["butlers", "detail", name] as const,
  config: (name: string) => ["butlers", "config", name] as const,
  tools: (name: string) => ["butlers", "tools", name] as const,
  tables: (name: string) => ["butlers", "tables", name] as const,
  table: (name: string, table: string, params?: Params) =>
    ["butlers", "table", name, table, params ?? {}] as const,
  logs: (name: string) => ["butlers", "logs", name] as const,
  modules: (name: string) => ["butlers", "modules", name] as const,
};

export const overviewKeys = { all: ["overview"] as const };
export const healthKeys = { all: ["health"] as const };

export const sessionKeys = {
  all: ["sessions"] as const,
  list: (params?: Params) => ["sessions", "list", params ?? {}] as const,
  detail: (butler: string, id: string) => ["sessions", "detail", butler, id] as const,
};

export const traceKeys = {
  all: ["traces"] as const,
  list: (params?: Params) => ["traces", "list", params ?? {}] as const,
  detail: (id: string) => ["traces", "detail", id] as const,
};

export const stateKeys = {
  all: ["state"] as const,
  list: (butler: string, params?: Params) => ["state", butler, params ?? {}] as const,
};

export const scheduleKeys = {
  all: ["schedules"] as const,
  list: (butler: string) => ["schedules", butler] as const,
};

export const costKeys = {
  all: ["costs"] as const,
  summary: (params?: Params) => ["costs", "summary", params ?? {}] as const,
  daily: (days: number) => ["costs", "daily", days] as const,
  top: (params?: Params) => ["costs", "top", params ?? {}] as const,
  bySchedule: (params?: Params) => ["costs", "by-schedule", params ?? {}] as const,
};

export const metricKeys = {
  all: ["metrics"] as const,
  series: (params?: Params) => ["metrics", params ?? {}] as const,
};

export const issueKeys = { all: ["issues"] as const };
export const conversationKeys = {
  all: ["conversations"] as const,
  list: (params?: Params) => ["conversations", "list", params ?? {}] as const,
  connectors: () => ["conversations", "connectors"] as const,
};
export const auditKeys = {
  all: ["audit"] as const,
  list: (params?: Params) => ["audit", params ?? {}] as const,
};
export const reminderKeys = {
  all: ["reminders"] as const,
  list: (params?: Params) => ["reminders", "list", params ?? {}] as const,
};

export const notificationKeys = {
  all: ["notifications"] as const,
  list: (params?: Params) => ["notifications", "list", params ?? {}] as const,
  stats: () => ["notifications", "stats"] as const,
};
export const timelineKeys = {
  all: ["timeline"] as const,
  list: (params?: Params) => ["timeline", params ?? {}] as const,
};
export const memoryKeys = {
  all: ["memory"] as const,
  stats: () => ["memory", "stats"] as const,
  facts: (params?: Params) => ["memory", "facts", params ?? {}] as const,
  fact: (id: string) => ["memory", "fact", id] as const,
  rules: (params?: Params) => ["memory", "rules", params ?? {}] as const,
  consolidations: (params?: Params) => ["memory", "consolidations", params ?? {}] as const,
};
export const searchKeys = { query: (q: string) => ["search", q] as const };
export const authKeys = { status: ["auth", "status"] as const };

export const triageKeys = {
  rules: () => ["triage-rules"] as const,
  affinity: () => ["thread-affinity", "settings"] as const,
  overrides: () => ["thread-affinity", "overrides"] as const,
};
export const secretKeys = {
  all: ["secrets"] as const,
  list: (store: string) => ["secrets", "list", store] as const,
};
export const oauthKeys = {
  all: ["oauth"] as const,
  status: () => ["oauth", "status"] as const,
  credentials: () => ["oauth", "credentials"] as const,
};

export const calendarKeys = {
  all: ["calendar"] as const,
  workspace: (params?: Params) => ["calendar", "workspace", params ?? {}] as const,
  meta: () => ["calendar", "meta"] as const,
};
