// Read hooks over the dashboard API, with the seed's refetch intervals.
import { keepPreviousData, useQuery } from "@tanstack/react-query";

import { apiFetch } from "../api/client";
import {
  approvalKeys,
  auditKeys,
  authKeys,
  butlerKeys,
  costKeys,
  healthKeys,
  issueKeys,
  memoryKeys,
  notificationKeys,
  oauthKeys,
  overviewKeys,
  scheduleKeys,
  secretKeys,
  sessionKeys,
  stateKeys,
  timelineKeys,
  traceKeys,
} from "../api/keys";
import type {
  ApiResponse,
  ApprovalAction,
  ApprovalMetrics,
  ApprovalRule,
  AuditEntry,
  AuthStatus,
  ButlerConfig,
  ButlerDetail,
  ButlerSummary,
  CostSummary,
  DailyCost,
  Health,
  Issue,
  LogTail,
  MemoryConsolidationRun,
  MemoryFact,
  MemoryFactDetail,
  MemoryRule,
  MemoryStats,
  Notification,
  NotificationStats,
  OAuthCredentials,
  OAuthStatus,
  Overview,
  Paginated,
  Schedule,
  ScheduleCost,
  SecretEntry,
  SessionDetail,
  SessionSummary,
  StateEntry,
  TableInfo,
  TimelineEvent,
  ToolInfo,
  TopSession,
  TraceDetail,
  TraceSummary,
} from "../api/types";

export const SECONDS = 1000;
const NO_INTERVAL = { staleTime: 60 * SECONDS } as const;

export type Interval = number | false;
export type Params = Record<string, string | number | boolean | null | undefined>;

export function useAuthStatus() {
  return useQuery({
    queryKey: authKeys.status,
    queryFn: () => apiFetch<ApiResponse<AuthStatus>>("/auth/status"),
    staleTime: 60 * SECONDS,
  });
}

export function useHealth() {
  return useQuery({
    queryKey: healthKeys.all,
    queryFn: () => apiFetch<ApiResponse<Health>>("/health"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useOverview() {
  return useQuery({
    queryKey: overviewKeys.all,
    queryFn: () => apiFetch<ApiResponse<Overview>>("/overview"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useButlers() {
  return useQuery({
    queryKey: butlerKeys.list(),
    queryFn: () => apiFetch<ApiResponse<ButlerSummary[]>>("/butlers"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useButler(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.detail(name ?? ""),
    queryFn: () => apiFetch<ApiResponse<ButlerDetail>>(`/butlers/${enc(name)}`),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
  });
}

export function useButlerConfig(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.config(name ?? ""),
    queryFn: () => apiFetch<ApiResponse<ButlerConfig>>(`/butlers/${enc(name)}/config`),
    enabled: !!name,
    ...NO_INTERVAL,
  });
}

export function useButlerTools(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.tools(name ?? ""),
    queryFn: () => apiFetch<ApiResponse<ToolInfo[]>>(`/butlers/${enc(name)}/mcp/tools`),
    enabled: !!name,
    ...NO_INTERVAL,
  });
}

export function useButlerTables(name: string | undefined) {
  return useQuery({
    queryKey: butlerKeys.tables(name ?? ""),
    queryFn: () => apiFetch<ApiResponse<TableInfo[]>>(`/butlers/${enc(name)}/tables`),
    enabled: !!name,
    ...NO_INTERVAL,
  });
}

export function useTableRows(name: string | undefined, table: string | null, offset: number) {
  const params = { offset, limit: 25 };
  return useQuery({
    queryKey: butlerKeys.table(name ?? "", table ?? "", params),
    queryFn: () =>
      apiFetch<Paginated<Record<string, unknown>>>(
        `/butlers/${enc(name)}/tables/${enc(table ?? "")}`,
        { params },
      ),
    enabled: !!name && !!table,
    placeholderData: keepPreviousData,
    ...NO_INTERVAL,
  });
}

export function useButlerLogs(name: string | undefined, interval: Interval) {
  return useQuery({
    queryKey: butlerKeys.logs(name ?? ""),
    queryFn: () =>
      apiFetch<ApiResponse<LogTail>>(`/butlers/${enc(name)}/logs`, { params: { lines: 200 } }),
    enabled: !!name,
    refetchInterval: interval,
  });
}

export function useSessions(params: Params, interval: Interval = 30 * SECONDS) {
  return useQuery({
    queryKey: sessionKeys.list(params),
    queryFn: () => apiFetch<Paginated<SessionSummary>>("/sessions", { params }),
    refetchInterval: interval,
    placeholderData: keepPreviousData,
  });
}

export function useButlerSessions(
  name: string | undefined,
  params: Params,
  interval: Interval = 30 * SECONDS,
) {
  return useSessions({ ...params, butler: name }, interval);
}

export function useSession(butler: string | undefined, id: string | undefined) {
  return useQuery({
    queryKey: sessionKeys.detail(butler ?? "", id ?? ""),
    queryFn: () =>
      apiFetch<ApiResponse<SessionDetail>>(`/butlers/${enc(butler)}/sessions/${enc(id)}`),
    enabled: !!butler && !!id,
    ...NO_INTERVAL,
    // A running session is followed until it ends.
    refetchInterval: (query) => (query.state.data?.data.status === "running" ? 2 * SECONDS : false),
  });
}

export function useTraces(params: Params) {
  return useQuery({
    queryKey: traceKeys.list(params),
    queryFn: () => apiFetch<Paginated<TraceSummary>>("/traces", { params }),
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useTraceDetail(traceId: string | undefined) {
  return useQuery({
    queryKey: traceKeys.detail(traceId ?? ""),
    queryFn: () => apiFetch<ApiResponse<TraceDetail>>(`/traces/${enc(traceId)}`),
    enabled: !!traceId,
    ...NO_INTERVAL,
  });
}

export function useTimeline(params: Params, interval: Interval = 30 * SECONDS) {
  return useQuery({
    queryKey: timelineKeys.list(params),
    queryFn: () => apiFetch<Paginated<TimelineEvent>>("/timeline", { params }),
    refetchInterval: interval,
  });
}

export function useButlerState(name: string | undefined, params: Params) {
  return useQuery({
    queryKey: stateKeys.list(name ?? "", params),
    queryFn: () => apiFetch<Paginated<StateEntry>>(`/butlers/${enc(name)}/state`, { params }),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useSchedules(name: string | undefined) {
  return useQuery({
    queryKey: scheduleKeys.list(name ?? ""),
    queryFn: () => apiFetch<ApiResponse<Schedule[]>>(`/butlers/${enc(name)}/schedules`),
    enabled: !!name,
    refetchInterval: 30 * SECONDS,
  });
}

export function useApprovalActions(params: Params) {
  return useQuery({
    queryKey: approvalKeys.actions(params),
    queryFn: () => apiFetch<Paginated<ApprovalAction>>("/approvals/actions", { params }),
    ...NO_INTERVAL,
  });
}

export function useExecutedActions(params: Params) {
  return useQuery({
    queryKey: approvalKeys.executed(params),
    queryFn: () => apiFetch<Paginated<ApprovalAction>>("/approvals/actions/executed", { params }),
    ...NO_INTERVAL,
  });
}

export function useApprovalMetrics() {
  return useQuery({
    queryKey: approvalKeys.metrics(),
    queryFn: () => apiFetch<ApiResponse<ApprovalMetrics>>("/approvals/metrics"),
    ...NO_INTERVAL,
  });
}

export function useApprovalRules() {
  return useQuery({
    queryKey: approvalKeys.rules(),
    queryFn: () => apiFetch<ApiResponse<ApprovalRule[]>>("/approvals/rules"),
    ...NO_INTERVAL,
  });
}

export function useCostSummary(period: string) {
  return useQuery({
    queryKey: costKeys.summary({ period }),
    queryFn: () => apiFetch<ApiResponse<CostSummary>>("/costs/summary", { params: { period } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useDailyCosts(days: number) {
  return useQuery({
    queryKey: costKeys.daily(days),
    queryFn: () => apiFetch<ApiResponse<DailyCost[]>>("/costs/daily", { params: { days } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useTopSessions(period: string) {
  return useQuery({
    queryKey: costKeys.top({ period }),
    queryFn: () =>
      apiFetch<ApiResponse<TopSession[]>>("/costs/top-sessions", {
        params: { period, limit: 10 },
      }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useCostsBySchedule(period: string) {
  return useQuery({
    queryKey: costKeys.bySchedule({ period }),
    queryFn: () =>
      apiFetch<ApiResponse<ScheduleCost[]>>("/costs/by-schedule", { params: { period } }),
    refetchInterval: 60 * SECONDS,
  });
}

export function useIssues() {
  return useQuery({
    queryKey: issueKeys.all,
    queryFn: () => apiFetch<ApiResponse<Issue[]>>("/issues"),
    refetchInterval: 30 * SECONDS,
  });
}

export function useAuditLog(params: Params) {
  return useQuery({
    queryKey: auditKeys.list(params),
    queryFn: () => apiFetch<Paginated<AuditEntry>>("/audit-log", { params }),
    refetchInterval: 30 * SECONDS,
    placeholderData: keepPreviousData,
  });
}

export function useNotifications(params: Params) {
  return useQuery({
    queryKey: notificationKeys.list(params),
    queryFn: () => apiFetch<Paginated<Notification>>("/notifications", { params }),
    placeholderData: keepPreviousData,
    ...NO_INTERVAL,
  });
}

export function useNotificationStats() {
  return useQuery({
    queryKey: notificationKeys.stats(),
    queryFn: () => apiFetch<ApiResponse<NotificationStats>>("/notifications/stats"),
    ...NO_INTERVAL,
  });
}

function enc(value: string | undefined | null): string {
  return encodeURIComponent(value ?? "");
}

export function useMemoryStats() {
  return useQuery({
    queryKey: memoryKeys.stats(),
    queryFn: () => apiFetch<ApiResponse<MemoryStats>>("/memory/stats"),
  });
}

/** A store's secrets (metadata only). For a butler, the shared store's secrets it does
 * not override are listed too, with source "shared". */
export function useSecrets(store: string) {
  return useQuery({
    queryKey: secretKeys.list(store),
    queryFn: async () => {
      const own = await apiFetch<ApiResponse<SecretEntry[]>>(`/butlers/${enc(store)}/secrets`);
      if (store === "shared") return own.data;
      const shared = await apiFetch<ApiResponse<SecretEntry[]>>("/butlers/shared/secrets");
      const mine = new Set(own.data.map((s) => s.key));
      return [...own.data, ...shared.data.filter((s) => !mine.has(s.key))];
    },
    refetchInterval: 30 * SECONDS,
  });
}

export function useFacts(params: Params) {
  return useQuery({
    queryKey: memoryKeys.facts(params),
    queryFn: () => apiFetch<Paginated<MemoryFact>>("/memory/facts", { params }),
    placeholderData: keepPreviousData,
    refetchInterval: 30 * SECONDS,
  });
}

export function useFact(id: string | null) {
  return useQuery({
    queryKey: memoryKeys.fact(id ?? ""),
    queryFn: () => apiFetch<ApiResponse<MemoryFactDetail>>(`/memory/facts/${enc(id ?? "")}`),
    enabled: !!id,
  });
}

export function useRules(params: Params) {
  return useQuery({
    queryKey: memoryKeys.rules(params),
    queryFn: () => apiFetch<Paginated<MemoryRule>>("/memory/rules", { params }),
    placeholderData: keepPreviousData,
    refetchInterval: 30 * SECONDS,
  });
}

export function useConsolidations(params: Params) {
  return useQuery({
    queryKey: memoryKeys.consolidations(params),
    queryFn: () =>
      apiFetch<Paginated<MemoryConsolidationRun>>("/memory/consolidations", { params }),
    refetchInterval: 30 * SECONDS,
  });
}

export function useOAuthStatus() {
  return useQuery({
    queryKey: oauthKeys.status(),
    queryFn: () => apiFetch<ApiResponse<OAuthStatus>>("/oauth/status"),
    refetchInterval: 60 * SECONDS,
  });
}

export function useOAuthCredentials() {
  return useQuery({
    queryKey: oauthKeys.credentials(),
    queryFn: () => apiFetch<ApiResponse<OAuthCredentials>>("/oauth/google/credentials"),
    ...NO_INTERVAL,
  });
}
