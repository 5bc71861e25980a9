// E-mail triage rules and thread affinity of the switchboard (seed 003's use-triage hooks):
// reads kept 60 s, writes through the switchboard's tools, the dry run changes nothing.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { apiFetch } from "../api/client";
import { triageKeys } from "../api/keys";
import type {
  ApiResponse,
  ThreadAffinitySettings,
  ThreadAffinityUpdate,
  ThreadOverride,
  ThreadUnpinned,
  TriageRule,
  TriageRuleCreate,
  TriageRuleDeleted,
  TriageRuleUpdate,
  TriageTest,
  TriageTestResult,
} from "../api/types";

const RULES = "/switchboard/triage-rules";
const AFFINITY = "/switchboard/thread-affinity";
const STALE = { staleTime: 60_000 } as const;
const enc = encodeURIComponent;

export function useTriageRules() {
  return useQuery({
    queryKey: triageKeys.rules(),
    queryFn: () => apiFetch<ApiResponse<TriageRule[]>>(RULES),
    ...STALE,
  });
}

function useRuleMutation<A, R>(fn: (arg: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: () => client.invalidateQueries({ queryKey: triageKeys.rules() }),
  });
}

export function useCreateTriageRule() {
  return useRuleMutation((body: TriageRuleCreate) =>
    apiFetch<ApiResponse<TriageRule>>(RULES, { method: "POST", body }),
  );
}

export function useUpdateTriageRule() {
  return useRuleMutation(({ id, body }: { id: string; body: TriageRuleUpdate }) =>
    apiFetch<ApiResponse<TriageRule>>(`${RULES}/${enc(id)}`, { method: "PATCH", body }),
  );
}

export function useDeleteTriageRule() {
  return useRuleMutation((id: string) =>
    apiFetch<ApiResponse<TriageRuleDeleted>>(`${RULES}/${enc(id)}`, { method: "DELETE" }),
  );
}

export function useTestTriageRule() {
  return useMutation({
    mutationFn: (body: TriageTest) =>
      apiFetch<ApiResponse<TriageTestResult>>(`${RULES}/test`, { method: "POST", body }),
  });
}

export function useThreadAffinitySettings() {
  return useQuery({
    queryKey: triageKeys.affinity(),
    queryFn: () => apiFetch<ApiResponse<ThreadAffinitySettings>>(AFFINITY),
    ...STALE,
  });
}

function useAffinityMutation<A, R>(fn: (arg: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: () =>
      Promise.all([
        client.invalidateQueries({ queryKey: triageKeys.affinity() }),
        client.invalidateQueries({ queryKey: triageKeys.overrides() }),
      ]),
  });
}

export function useUpdateThreadAffinitySettings() {
  return useAffinityMutation((body: ThreadAffinityUpdate) =>
    apiFetch<ApiResponse<ThreadAffinitySettings>>(AFFINITY, { method: "PATCH", body }),
  );
}

export function useUpsertThreadAffinityOverride() {
  return useAffinityMutation(({ threadId, butler }: { threadId: string; butler: string }) =>
    apiFetch<ApiResponse<ThreadOverride>>(`${AFFINITY}/overrides/${enc(threadId)}`, {
      method: "PUT",
      body: { butler },
    }),
  );
}

export function useDeleteThreadAffinityOverride() {
  return useAffinityMutation((threadId: string) =>
    apiFetch<ApiResponse<ThreadUnpinned>>(`${AFFINITY}/overrides/${enc(threadId)}`, {
      method: "DELETE",
    }),
  );
}
