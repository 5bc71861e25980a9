// Writes: each goes through the dashboard to the owning butler's MCP tools, and on success
// invalidates what it changed.
import { useMutation, useQueryClient } from "@tanstack/react-query";

import { api } from "../api/client";
import {
  approvalKeys,
  butlerKeys,
  memoryKeys,
  calendarKeys,
  overviewKeys,
  reminderKeys,
  scheduleKeys,
  sessionKeys,
  oauthKeys,
  secretKeys,
  stateKeys,
} from "../api/keys";
import type {
  AppCredentials,
  CalendarUserEventWrite,
  JsonValue,
  ScheduleCreate,
  ScheduleUpdate,
  SecretWrite,
  TriggerRequest,
} from "../api/types";

export function useSetState(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ key, value }: { key: string; value: unknown }) =>
      api.put("/api/butlers/{name}/state/{key}", {
        path: { name: butler, key },
        body: { value: value as JsonValue },
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: stateKeys.list(butler).slice(0, 2) }),
  });
}

export function useDeleteState(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (key: string) =>
      api.delete("/api/butlers/{name}/state/{key}", { path: { name: butler, key } }),
    onSuccess: () => client.invalidateQueries({ queryKey: stateKeys.list(butler).slice(0, 2) }),
  });
}

export function useCreateSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: ScheduleCreate) =>
      api.post("/api/butlers/{name}/schedules", { path: { name: butler }, body }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useUpdateSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ id, body }: { id: string; body: ScheduleUpdate }) =>
      api.put("/api/butlers/{name}/schedules/{schedule_id}", {
        path: { name: butler, schedule_id: id },
        body,
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useToggleSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ id, enabled }: { id: string; enabled: boolean }) =>
      api.patch("/api/butlers/{name}/schedules/{schedule_id}/toggle", {
        path: { name: butler, schedule_id: id },
        body: { enabled },
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useDeleteSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: string) =>
      api.delete("/api/butlers/{name}/schedules/{schedule_id}", {
        path: { name: butler, schedule_id: id },
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useDecideApproval() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({
      id,
      decision,
      reason,
    }: {
      id: string;
      decision: "approve" | "reject";
      reason: string;
    }) =>
      api.post(
        decision === "approve"
          ? "/api/approvals/actions/{action_id}/approve"
          : "/api/approvals/actions/{action_id}/reject",
        { path: { action_id: id }, body: { reason: reason || null } },
      ),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: approvalKeys.all });
      client.invalidateQueries({ queryKey: overviewKeys.all });
    },
  });
}

export function useExpireStale() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      api.post("/api/approvals/actions/expire-stale"),
    onSuccess: () => client.invalidateQueries({ queryKey: approvalKeys.all }),
  });
}

export function useTrigger(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: TriggerRequest) =>
      api.post("/api/butlers/{name}/trigger", { path: { name: butler }, body }),
    onSuccess: () => client.invalidateQueries({ queryKey: sessionKeys.all }),
  });
}

export function useCancelSession(butler: string, id: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      api.post("/api/butlers/{name}/sessions/{session_id}/cancel", {
        path: { name: butler, session_id: id },
      }),
    onSuccess: (answer) => {
      client.setQueryData(sessionKeys.detail(butler, id), answer);
      client.invalidateQueries({ queryKey: sessionKeys.list().slice(0, 2) });
    },
  });
}

export function useCancelReminder() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ butler, id }: { butler: string; id: string }) =>
      api.post("/api/butlers/{name}/reminders/{reminder_id}/cancel", {
        path: { name: butler, reminder_id: id },
      }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: reminderKeys.all });
    },
  });
}

export function useTick(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      api.post("/api/butlers/{name}/tick", { path: { name: butler } }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: scheduleKeys.list(butler) });
      client.invalidateQueries({ queryKey: sessionKeys.all });
    },
  });
}

export function useCallTool(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ tool, args }: { tool: string; args: Record<string, unknown> }) =>
      api.post("/api/butlers/{name}/mcp/call", {
        path: { name: butler },
        body: { tool_name: tool, arguments: args as Record<string, JsonValue> },
      }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: butlerKeys.detail(butler) });
      client.invalidateQueries({ queryKey: stateKeys.all });
      client.invalidateQueries({ queryKey: scheduleKeys.list(butler) });
    },
  });
}

export type MemoryCorrection = "retract" | "restore" | "confirm";

export function useCorrectMemory() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: async ({
      kind,
      id,
      action,
    }: {
      kind: "facts" | "rules";
      id: string;
      action: MemoryCorrection;
    }) => {
      if (kind === "facts") {
        return await api.post(`/api/memory/facts/{fact_id}/${action}`, { path: { fact_id: id } });
      }
      return await api.post(`/api/memory/rules/{rule_id}/${action}`, { path: { rule_id: id } });
    },
    onSuccess: () => client.invalidateQueries({ queryKey: memoryKeys.all }),
  });
}

// Share a fact with exactly these butlers ([] unshares); the owner's call only.
export function useShareFact() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ id, butlers }: { id: string; butlers: string[] }) =>
      api.post("/api/memory/facts/{fact_id}/share", { path: { fact_id: id }, body: { butlers } }),
    onSuccess: () => client.invalidateQueries({ queryKey: memoryKeys.all }),
  });
}

// One consolidation run of a butler now (it asks the butler's model: may take a while).
export function useConsolidateNow() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (butler: string) => api.post("/api/memory/consolidate", { body: { butler } }),
    onSuccess: () => client.invalidateQueries({ queryKey: memoryKeys.all }),
  });
}

export function useCalendarSync() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (butler?: string) =>
      api.post("/api/calendar/workspace/sync", { body: butler ? { butler } : {} }),
    onSuccess: () => client.invalidateQueries({ queryKey: calendarKeys.all }),
  });
}

export function useCalendarUserEvent() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: CalendarUserEventWrite) =>
      api.post("/api/calendar/workspace/user-events", { body }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: calendarKeys.all });
      client.invalidateQueries({ queryKey: approvalKeys.all });
    },
  });
}

export function usePutSecret(store: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ key, body }: { key: string; body: SecretWrite }) =>
      api.put("/api/butlers/{name}/secrets/{key}", { path: { name: store, key }, body }),
    onSuccess: () => client.invalidateQueries({ queryKey: secretKeys.all }),
  });
}

export function useDeleteSecret(store: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (key: string) =>
      api.delete("/api/butlers/{name}/secrets/{key}", { path: { name: store, key } }),
    onSuccess: () => client.invalidateQueries({ queryKey: secretKeys.all }),
  });
}

export function useRotateSecrets() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => api.post("/api/secrets/rotate"),
    onSuccess: () => client.invalidateQueries({ queryKey: secretKeys.all }),
  });
}

export function usePutOAuthCredentials() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: AppCredentials) => api.put("/api/oauth/google/credentials", { body }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: oauthKeys.all });
      client.invalidateQueries({ queryKey: secretKeys.all });
    },
  });
}

export function useDeleteOAuthCredentials() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => api.delete("/api/oauth/google/credentials"),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: oauthKeys.all });
      client.invalidateQueries({ queryKey: secretKeys.all });
    },
  });
}

export function useToggleModule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ module, enabled }: { module: string; enabled: boolean }) =>
      api.put("/api/butlers/{name}/module-states/{module}/enabled", {
        path: { name: butler, module },
        body: { enabled },
      }),
    // Its tools, its status and the butler's module list all change.
    onSuccess: () => client.invalidateQueries({ queryKey: butlerKeys.all }),
  });
}
