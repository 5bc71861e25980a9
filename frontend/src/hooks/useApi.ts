// Read hooks over the dashboard API, with the seed's refetch intervals.
import { keepPreviousData, useQuery } from "@tanstack/react-query";

import { api, type Query } from "../api/client";
import type { CostPeriod } from "../api/enums";
import {
  approvalKeys,
  auditKeys,
  authKeys,
  butlerKeys,
  calendarKeys,
  costKeys,
  healthKeys,
  issueKeys,
  metricKeys,
  memoryKeys,
  notificationKeys,
  oauthKeys,
  reminderKeys,
  overviewKeys,
  scheduleKeys,
  secretKeys,
  sessionKeys,
  stateKeys,
  timelineKeys,
  traceKeys,
} from "../api/keys";

export const SECONDS = 1000;
const NO_INTERVAL = { staleTime: 60 * SECONDS } as const;

export type Interval = number | false;

export function useAuthStatus() {
  return useQuery({
    queryKey: authKeys.status,
    queryFn: () => api.get("/api/auth/status"),
    staleTime: 60 * SECONDS,
  });
}

export function useHealth() {
  return useQuery({
    queryKey: healthKeys.all,
    queryFn: () => api.get("/api/health"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useOverview() {
  return useQuery({
    queryKey: overviewKeys.all,
    queryFn: () => api.get("/api/overview"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useButlers() {
  return useQuery({
    queryKey: butlerKeys.list(),
    queryFn: () => api.get("/api/butlers"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useButler(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.detail(name ?? ""),
    queryFn: () => api.get("/api/butlers/{name}", { path: { name: name ?? "" } }),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
  });
}

export function useButlerConfig(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.config(name ?? ""),
    queryFn: () => api.get("/api/butlers/{name}/config", { path: { name: name ?? "" } }),
    enabled: !!name,
    ...NO_INTERVAL,
  });
}

export function useModuleStates(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.modules(name ?? ""),
    queryFn: () => api.get("/api/butlers/{name}/module-states", { path: { name: name ?? "" } }),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
  });
}

export function useButlerTools(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.tools(name ?? ""),
    queryFn: () => api.get("/api/butlers/{name}/mcp/tools", { path: { name: name ?? "" } }),
    enabled: !!name,
    ...NO_INTERVAL,
  });
}

export function useButlerTables(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.tables(name ?? ""),
    queryFn: () => api.get("/api/butlers/{name}/tables", { path: { name: name ?? "" } }),
    enabled: !!name,
    ...NO_INTERVAL,
  });
}

export function useTableRows(name: string | undefined, table: string | null, offset: number) {
  const params = { offset, limit: 25 };
  return useQuery({
    queryKey: butlerKeys.table(name ?? "", table ?? "", params),
    queryFn: () =>
      api.get("/api/butlers/{name}/tables/{table}", {
        path: { name: name ?? "", table: table ?? "" },
        query: params,
      }),
    enabled: !!name && !!table,
    placeholderData: keepPreviousData,
    ...NO_INTERVAL,
  });
}

export function useButlerLogs(name: string | undefined, interval: Interval) {
  return useQuery({
    queryKey: butlerKeys.logs(name ?? ""),
    queryFn: () =>
      api.get("/api/butlers/{name}/logs", { path: { name: name ?? "" }, query: { lines: 200 } }),
    enabled: !!name,
    refetchInterval: interval,
  });
}

export function useSessions(params: Query<"/api/sessions">, interval: Interval = 30 * SECONDS) {
  return useQuery({
    queryKey: sessionKeys.list(params),
    queryFn: () => api.get("/api/sessions", { query: params }),
    refetchInterval: interval,
    placeholderData: keepPreviousData,
  });
}

export function useSessionKinds(params: Query<"/api/sessions/kinds">, interval: Interval = 30 * SECONDS) {
  return useQuery({
    queryKey: [...sessionKeys.all, "kinds", params] as const,
    queryFn: () => api.get("/api/sessions/kinds", { query: params }),
    refetchInterval: interval,
    placeholderData: keepPreviousData,
  });
}

export function useButlerSessions(
  name: string | undefined,
  params: Query<"/api/sessions">,
  interval: Interval = 30 * SECONDS,
) {
  return useSessions({ ...params, butler: name ? [name] : undefined }, interval);
}

export function useSession(butler: string | undefined, id: string | undefined) {
  return useQuery({
    queryKey: sessionKeys.detail(butler ?? "", id ?? ""),
    queryFn: () =>
      api.get("/api/butlers/{name}/sessions/{session_id}", {
        path: { name: butler ?? "", session_id: id ?? "" },
      }),
    enabled: !!butler && !!id,
    ...NO_INTERVAL,
    // A running session is followed until it ends.
    refetchInterval: (query) => (query.state.data?.data.status === "running" ? 2 * SECONDS : false),
  });
}

export function useTraces(params: Query<"/api/traces">) {
  return useQuery({
    queryKey: traceKeys.list(params),
    queryFn: () => api.get("/api/traces", { query: params }),
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useTraceDetail(traceId: string | undefined) {
  return useQuery({
    queryKey: traceKeys.detail(traceId ?? ""),
    queryFn: () => api.get("/api/traces/{trace_id}", { path: { trace_id: traceId ?? "" } }),
    enabled: !!traceId,
    ...NO_INTERVAL,
  });
}

export function useTimeline(params: Query<"/api/timeline">, interval: Interval = 30 * SECONDS) {
  return useQuery({
    queryKey: timelineKeys.list(params),
    queryFn: () => api.get("/api/timeline", { query: params }),
    refetchInterval: interval,
  });
}

export function useButlerState(
  name: string | undefined,
  params: Query<"/api/butlers/{name}/state">,
) {
  return useQuery({
    queryKey: stateKeys.list(name ?? "", params),
    queryFn: () => api.get("/api/butlers/{name}/state", { path: { name: name ?? "" }, query: params }),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useSchedules(name: string | undefined) {
  return useQuery({
    queryKey: scheduleKeys.list(name ?? ""),
    queryFn: () => api.get("/api/butlers/{name}/schedules", { path: { name: name ?? "" } }),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
  });
}

/** Pending approvals: refreshed by events, and every `interval` when one is given (a
 *  page waiting on one held call polls, so it never depends on the stream alone). */
export function useApprovalActions(params: Query<"/api/approvals/actions">, interval?: Interval) {
  return useQuery({
    queryKey: approvalKeys.actions(params),
    queryFn: () => api.get("/api/approvals/actions", { query: params }),
    ...(interval ? { refetchInterval: interval, staleTime: 0 } : NO_INTERVAL),
  });
}

export function useExecutedActions(params: Query<"/api/approvals/actions/executed">) {
  return useQuery({
    queryKey: approvalKeys.executed(params),
    queryFn: () => api.get("/api/approvals/actions/executed", { query: params }),
    ...NO_INTERVAL,
  });
}

export function useApprovalMetrics() {
  return useQuery({
    queryKey: approvalKeys.metrics(),
    queryFn: () => api.get("/api/approvals/metrics"),
    ...NO_INTERVAL,
  });
}

export function useApprovalRules() {
  return useQuery({
    queryKey: approvalKeys.rules(),
    queryFn: () => api.get("/api/approvals/rules"),
    ...NO_INTERVAL,
  });
}

export function useCostSummary(period: CostPeriod) {
  return useQuery({
    queryKey: costKeys.summary({ period }),
    queryFn: () => api.get("/api/costs/summary", { query: { period } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useMetrics(query: Query<"/api/metrics">) {
  return useQuery({
    queryKey: metricKeys.series(query),
    queryFn: () => api.get("/api/metrics", { query }),
    refetchInterval: 60 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useDailyCosts(days: number) {
  return useQuery({
    queryKey: costKeys.daily(days),
    queryFn: () => api.get("/api/costs/daily", { query: { days } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useTopSessions(period: CostPeriod) {
  return useQuery({
    queryKey: costKeys.top({ period }),
    queryFn: () =>
      api.get("/api/costs/top-sessions", { query: { period, limit: 10 } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useCostsBySchedule(period: CostPeriod) {
  return useQuery({
    queryKey: costKeys.bySchedule({ period }),
    queryFn: () =>
      api.get("/api/costs/by-schedule", { query: { period } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useIssues() {
  return useQuery({
    queryKey: issueKeys.all,
    queryFn: () => api.get("/api/issues"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useAuditLog(params: Query<"/api/audit-log">) {
  return useQuery({
    queryKey: auditKeys.list(params),
    queryFn: () => api.get("/api/audit-log", { query: params }),
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useNotifications(params: Query<"/api/notifications">) {
  return useQuery({
    queryKey: notificationKeys.list(params),
    queryFn: () => api.get("/api/notifications", { query: params }),
    placeholderData: keepPreviousData,
    ...NO_INTERVAL,
  });
}

export function useReminders(params: Query<"/api/reminders">) {
  return useQuery({
    queryKey: reminderKeys.list(params),
    queryFn: () => api.get("/api/reminders", { query: params }),
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useNotificationStats() {
  return useQuery({
    queryKey: notificationKeys.stats(),
    queryFn: () => api.get("/api/notifications/stats"),
    ...NO_INTERVAL,
  });
}

export function useMemoryStats() {
  return useQuery({
    queryKey: memoryKeys.stats(),
    queryFn: () => api.get("/api/memory/stats"),
  });
}

/** A store's secrets (metadata only). For a butler, the shared store's secrets it does
 * not override are listed too, with source "shared". */
export function useSecrets(store: string) {
  return useQuery({
    queryKey: secretKeys.list(store),
    queryFn: async () => {
      const own = await api.get("/api/butlers/{name}/secrets", { path: { name: store } });
      if (store === "shared") return own.data;
      const shared = await api.get("/api/butlers/{name}/secrets", { path: { name: "shared" } });
      const mine = new Set(own.data.map((s) => s.key));
      return [...own.data, ...shared.data.filter((s) => !mine.has(s.key))];
    },
    refetchInterval: 30 * SECONDS,
  });
}

export function useFacts(params: Query<"/api/memory/facts">) {
  return useQuery({
    queryKey: memoryKeys.facts(params),
    queryFn: () => api.get("/api/memory/facts", { query: params }),
    placeholderData: keepPreviousData,
    refetchInterval: 30 * SECONDS,
  });
}

export function useFact(id: string | null) {
  return useQuery({
    queryKey: memoryKeys.fact(id ?? ""),
    queryFn: () => api.get("/api/memory/facts/{fact_id}", { path: { fact_id: id ?? "" } }),
    enabled: !!id,
  });
}

export function useRules(params: Query<"/api/memory/rules">) {
  return useQuery({
    queryKey: memoryKeys.rules(params),
    queryFn: () => api.get("/api/memory/rules", { query: params }),
    placeholderData: keepPreviousData,
    refetchInterval: 30 * SECONDS,
  });
}

export function useConsolidations(params: Query<"/api/memory/consolidations">) {
  return useQuery({
    queryKey: memoryKeys.consolidations(params),
    queryFn: () => api.get("/api/memory/consolidations", { query: params }),
    refetchInterval: 30 * SECONDS,
  });
}

export function useOAuthStatus() {
  return useQuery({
    queryKey: oauthKeys.status(),
    queryFn: () => api.get("/api/oauth/status"),
    refetchInterval: 60 * SECONDS,
  });
}

export function useOAuthCredentials() {
  return useQuery({
    queryKey: oauthKeys.credentials(),
    queryFn: () => api.get("/api/oauth/google/credentials"),
    ...NO_INTERVAL,
  });
}

// The calendar workspace: entries of one view over a range, and the sources' sync state.
export function useCalendarWorkspace(
  params: Query<"/api/calendar/workspace">,
  refetchInterval: number = 30 * SECONDS,
) {
  return useQuery({
    queryKey: calendarKeys.workspace(params),
    queryFn: () => api.get("/api/calendar/workspace", { query: params }),
    refetchInterval,
    placeholderData: keepPreviousData,
  });
}

export function useCalendarWorkspaceMeta(refetchInterval: number = 60 * SECONDS) {
  return useQuery({
    queryKey: calendarKeys.meta(),
    queryFn: () => api.get("/api/calendar/workspace/meta"),
    refetchInterval,
  });
}
