// The dashboard's event stream (GET /api/events) and what each event makes stale.
import type { QueryKey } from "@tanstack/react-query";

import { membersOf } from "./enums";
import {
  approvalKeys,
  butlerKeys,
  conversationKeys,
  costKeys,
  issueKeys,
  metricKeys,
  overviewKeys,
  scheduleKeys,
  sessionKeys,
  stateKeys,
  timelineKeys,
  traceKeys,
} from "./keys";
import type { components } from "./schema";

/** An event type of the stream, as the API's schema publishes it (`SseEvent.type`). */
export type EventType = components["schemas"]["SseEvent"]["type"];

/** Every event type, each named once: one the schema adds (or drops) and this list does
 * not is a type error, so the stream's listeners follow the API. */
export const EVENT_TYPES = membersOf<EventType>({
  connected: true,
  resync: true,
  butler_status: true,
  session_start: true,
  session_end: true,
  approval_requested: true,
  approval_decided: true,
  message_accepted: true,
  message_classified: true,
  message_done: true,
  schedule_changed: true,
  state_changed: true,
  feed_status: true,
});

export type EventData = Record<string, unknown>;

export interface LiveEvent {
  id: string | null;
  type: EventType;
  data: EventData;
  receivedAt: number;
}

function butlerOf(data: EventData): string | null {
  return typeof data.butler === "string" ? data.butler : null;
}

/** The query keys (prefixes) an event makes stale. `resync` makes everything stale. */
export function keysFor(type: EventType, data: EventData): QueryKey[] | "all" {
  const butler = butlerOf(data);
  switch (type) {
    case "resync":
      return "all";
    case "butler_status":
      return [overviewKeys.all, butlerKeys.list(), ...(butler ? [butlerKeys.detail(butler)] : []), issueKeys.all];
    case "session_start":
      return [
        sessionKeys.list(undefined).slice(0, 2),
        overviewKeys.all,
        timelineKeys.all,
        conversationKeys.all,
      ];
    case "session_end":
      return [
        sessionKeys.all,
        traceKeys.all,
        overviewKeys.all,
        timelineKeys.all,
        costKeys.all,
        metricKeys.all,
        issueKeys.all,
        conversationKeys.all,
      ];
    case "approval_requested":
    case "approval_decided":
      return [approvalKeys.all, overviewKeys.all, timelineKeys.all];
    case "message_accepted":
    case "message_classified":
    case "message_done":
      return [traceKeys.all, timelineKeys.all, ["switchboard"], issueKeys.all, conversationKeys.all];
    case "schedule_changed":
      return butler ? [scheduleKeys.list(butler), overviewKeys.all] : [scheduleKeys.all];
    case "state_changed":
      return butler ? [["state", butler]] : [stateKeys.all];
    default:
      return [];
  }
}

/** A one-line, human description of an event for the activity feed. */
export function describe(event: LiveEvent): string {
  const d = event.data;
  const who = butlerOf(d) ?? "dashboard";
  switch (event.type) {
    case "butler_status":
      return `${who} is ${String(d.status)}${d.reason ? `: ${String(d.reason)}` : ""}`;
    case "session_start":
      return `${who}: session started (${String(d.trigger_source ?? "?")})`;
    case "session_end":
      return `${who}: session ${String(d.status)}${d.error ? `: ${String(d.error)}` : ""}`;
    case "approval_requested":
      return `${who}: approval requested for ${String(d.tool_name)}`;
    case "approval_decided":
      return `${who}: ${String(d.tool_name)} ${String(d.status)}`;
    case "message_accepted":
      return `message accepted on ${String(d.channel ?? "?")}`;
    case "message_classified":
      return "message classified";
    case "message_done":
      return `message ${String(d.status)}`;
    case "schedule_changed":
      return `${who}: schedule ${d.deleted ? "deleted" : `${String(d.name)} changed`}`;
    case "state_changed":
      return `${who}: state ${String(d.key ?? "")} changed`;
    case "feed_status":
      return `live updates: ${String(d.mode)}${d.reason ? ` (${String(d.reason)})` : ""}`;
    case "resync":
      return "reconnected: reloading everything";
    default:
      return event.type;
  }
}

export function parseEvent(type: EventType, raw: MessageEvent<string>): LiveEvent {
  let data: EventData = {};
  try {
    const parsed: unknown = JSON.parse(raw.data);
    if (parsed && typeof parsed === "object") data = parsed as EventData;
  } catch {
    data = {};
  }
  return { id: raw.lastEventId || null, type, data, receivedAt: Date.now() };
}
