// E-mail triage rules and thread affinity of the switchboard (seed 003's use-triage hooks):
// reads kept 60 s, writes through the switchboard's tools, the dry run changes nothing.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api } from "../api/client";
import { triageKeys } from "../api/keys";
import type { ThreadAffinityUpdate, TriageRuleCreate, TriageRuleUpdate, TriageTest } from "../api/types";

const STALE = { staleTime: 60_000 } as const;

export function useTriageRules() {
  return useQuery({
    queryKey: triageKeys.rules(),
    queryFn: () => api.get("/api/switchboard/triage-rules"),
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
    api.post("/api/switchboard/triage-rules", { body }),
  );
}

export function useUpdateTriageRule() {
  return useRuleMutation(({ id, body }: { id: string; body: TriageRuleUpdate }) =>
    api.patch("/api/switchboard/triage-rules/{rule_id}", { path: { rule_id: id }, body }),
  );
}

export function useDeleteTriageRule() {
  return useRuleMutation((id: string) =>
    api.delete("/api/switchboard/triage-rules/{rule_id}", { path: { rule_id: id } }),
  );
}

export function useTestTriageRule() {
  return useMutation({
    mutationFn: (body: TriageTest) =>
      api.post("/api/switchboard/triage-rules/test", { body }),
  });
}

export function useThreadAffinitySettings() {
  return useQuery({
    queryKey: triageKeys.affinity(),
    queryFn: () => api.get("/api/switchboard/thread-affinity"),
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
    api.patch("/api/switchboard/thread-affinity", { body }),
  );
}

export function useUpsertThreadAffinityOverride() {
  return useAffinityMutation(({ threadId, butler }: { threadId: string; butler: string }) =>
    api.put("/api/switchboard/thread-affinity/overrides/{thread_id}", {
      path: { thread_id: threadId },
      body: { butler, channel: "email" },
    }),
  );
}

export function useDeleteThreadAffinityOverride() {
  return useAffinityMutation((threadId: string) =>
    api.delete("/api/switchboard/thread-affinity/overrides/{thread_id}", {
      path: { thread_id: threadId },
    }),
  );
}
