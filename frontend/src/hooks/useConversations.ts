// The Conversations page: messages with what became of them (refreshed by the event
// stream: message and session events make them stale), the owner's own messages sent
// through the switchboard, quarantine decisions, and the channel connectors' health.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { api, type Query } from "../api/client";
import { conversationKeys, issueKeys, overviewKeys } from "../api/keys";
import { SECONDS } from "./useApi";

export function useConversations(params: Query<"/api/conversations">) {
  return useQuery({
    queryKey: conversationKeys.list(params),
    queryFn: () => api.get("/api/conversations", { query: params }),
    refetchInterval: 30 * SECONDS,
  });
}

export function useConnectors() {
  return useQuery({
    queryKey: conversationKeys.connectors(),
    queryFn: () => api.get("/api/connectors"),
    refetchInterval: 30 * SECONDS,
  });
}

function useConversationMutation<A, R>(fn: (arg: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: () =>
      Promise.all([
        client.invalidateQueries({ queryKey: conversationKeys.all }),
        client.invalidateQueries({ queryKey: overviewKeys.all }),
        client.invalidateQueries({ queryKey: issueKeys.all }),
      ]),
  });
}

export function useSendAsOwner() {
  return useConversationMutation((text: string) =>
    api.post("/api/conversations/messages", { body: { text } }),
  );
}

export function useReleaseMessage() {
  return useConversationMutation((requestId: string) =>
    api.post("/api/switchboard/messages/{request_id}/release", { path: { request_id: requestId } }),
  );
}

export function useDropMessage() {
  return useConversationMutation((requestId: string) =>
    api.post("/api/switchboard/messages/{request_id}/drop", { path: { request_id: requestId } }),
  );
}
