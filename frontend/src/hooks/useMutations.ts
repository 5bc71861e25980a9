// Writes: each goes through the dashboard to the owning butler's MCP tools, and on success
// invalidates what it changed.
import { useMutation, useQueryClient } from "@tanstack/react-query";

import { apiFetch } from "../api/client";
import {
  approvalKeys,
  butlerKeys,
  memoryKeys,
  overviewKeys,
  scheduleKeys,
  sessionKeys,
  oauthKeys,
  secretKeys,
  stateKeys,
} from "../api/keys";
import type {
  ApiResponse,
  ApprovalAction,
  MCPToolCallResponse,
  OAuthCredentials,
  RotationResult,
  Schedule,
  ScheduleCreate,
  ScheduleDeleted,
  ScheduleUpdate,
  SecretEntry,
  SecretWrite,
  SessionDetail,
  StateWritten,
  TickResult,
  TriggerRequest,
  TriggerResult,
} from "../api/types";

const enc = encodeURIComponent;

export function useSetState(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ key, value }: { key: string; value: unknown }) =>
      apiFetch<ApiResponse<StateWritten>>(`/butlers/${enc(butler)}/state/${enc(key)}`, {
        method: "PUT",
        body: { value },
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: stateKeys.list(butler).slice(0, 2) }),
  });
}

export function useDeleteState(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (key: string) =>
      apiFetch<ApiResponse<StateWritten>>(`/butlers/${enc(butler)}/state/${enc(key)}`, {
        method: "DELETE",
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: stateKeys.list(butler).slice(0, 2) }),
  });
}

export function useCreateSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: ScheduleCreate) =>
      apiFetch<ApiResponse<Schedule>>(`/butlers/${enc(butler)}/schedules`, {
        method: "POST",
        body,
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useUpdateSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ id, body }: { id: string; body: ScheduleUpdate }) =>
      apiFetch<ApiResponse<Schedule>>(`/butlers/${enc(butler)}/schedules/${enc(id)}`, {
        method: "PUT",
        body,
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useToggleSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ id, enabled }: { id: string; enabled: boolean }) =>
      apiFetch<ApiResponse<Schedule>>(`/butlers/${enc(butler)}/schedules/${enc(id)}/toggle`, {
        method: "PATCH",
        body: { enabled },
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: scheduleKeys.list(butler) }),
  });
}

export function useDeleteSchedule(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: string) =>
      apiFetch<ApiResponse<ScheduleDeleted>>(`/butlers/${enc(butler)}/schedules/${enc(id)}`, {
        method: "DELETE",
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
      apiFetch<ApiResponse<ApprovalAction>>(`/approvals/actions/${enc(id)}/${decision}`, {
        method: "POST",
        body: { reason: reason || null },
      }),
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
      apiFetch<ApiResponse<{ expired: number }>>("/approvals/actions/expire-stale", {
        method: "POST",
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: approvalKeys.all }),
  });
}

export function useTrigger(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: TriggerRequest) =>
      apiFetch<ApiResponse<TriggerResult>>(`/butlers/${enc(butler)}/trigger`, {
        method: "POST",
        body,
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: sessionKeys.all }),
  });
}

export function useCancelSession(butler: string, id: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      apiFetch<ApiResponse<SessionDetail>>(`/butlers/${enc(butler)}/sessions/${enc(id)}/cancel`, {
        method: "POST",
      }),
    onSuccess: (answer) => {
      client.setQueryData(sessionKeys.detail(butler, id), answer);
      client.invalidateQueries({ queryKey: sessionKeys.list().slice(0, 2) });
    },
  });
}

export function useTick(butler: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      apiFetch<ApiResponse<TickResult>>(`/butlers/${enc(butler)}/tick`, { method: "POST" }),
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
      apiFetch<ApiResponse<MCPToolCallResponse>>(`/butlers/${enc(butler)}/mcp/call`, {
        method: "POST",
        body: { tool_name: tool, arguments: args },
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
    mutationFn: ({
      kind,
      id,
      action,
    }: {
      kind: "facts" | "rules";
      id: string;
      action: MemoryCorrection;
    }) => apiFetch<ApiResponse<unknown>>(`/memory/${kind}/${enc(id)}/${action}`, { method: "POST" }),
    onSuccess: () => client.invalidateQueries({ queryKey: memoryKeys.all }),
  });
}

export function usePutSecret(store: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ key, body }: { key: string; body: SecretWrite }) =>
      apiFetch<ApiResponse<SecretEntry>>(`/butlers/${enc(store)}/secrets/${enc(key)}`, {
        method: "PUT",
        body,
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: secretKeys.all }),
  });
}

export function useDeleteSecret(store: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (key: string) =>
      apiFetch<ApiResponse<SecretEntry>>(`/butlers/${enc(store)}/secrets/${enc(key)}`, {
        method: "DELETE",
      }),
    onSuccess: () => client.invalidateQueries({ queryKey: secretKeys.all }),
  });
}

export function useRotateSecrets() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => apiFetch<ApiResponse<RotationResult>>("/secrets/rotate", { method: "POST" }),
    onSuccess: () => client.invalidateQueries({ queryKey: secretKeys.all }),
  });
}

export function usePutOAuthCredentials() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { client_id: string; client_secret: string }) =>
      apiFetch<ApiResponse<OAuthCredentials>>("/oauth/google/credentials", { method: "PUT", body }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: oauthKeys.all });
      client.invalidateQueries({ queryKey: secretKeys.all });
    },
  });
}

export function useDeleteOAuthCredentials() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () =>
      apiFetch<ApiResponse<OAuthCredentials>>("/oauth/google/credentials", { method: "DELETE" }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: oauthKeys.all });
      client.invalidateQueries({ queryKey: secretKeys.all });
    },
  });
}
