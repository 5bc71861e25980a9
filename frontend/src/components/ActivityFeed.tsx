import { Link } from "react-router-dom";

import { describe, type LiveEvent } from "../api/events";
import type { TimelineEvent } from "../api/types";
import { useTimeline } from "../hooks/useApi";
import { useLive } from "../hooks/useLiveEvents";
import { ago } from "../lib/format";
import { DataState } from "./DataState";
import { StatusBadge } from "./Status";

export const FEED_SIZE = 30;

/** One line of the activity feed: a recorded event (the timeline) or one only the live
 * stream knows of (a butler going down, a state write, ...). */
export interface FeedEntry {
  key: string; // `${kind}:${ref}`: the same event from both sources has the same key
  at: number;
  butler: string | null;
  kind: string;
  ref: string;
  text: string;
  status: string | null;
  source: "recorded" | "live";
}

/** The timeline entry a live event is, when it is one: its kind and reference. Inbox
 * events are one message's changes of status, which the timeline shows as one line. */
export function timelineKeyOf(event: LiveEvent): string | null {
  const d = event.data;
  const text = (v: unknown) => (typeof v === "string" && v ? v : null);
  switch (event.type) {
    case "session_start":
    case "session_end": {
      const id = text(d.session_id);
      return id ? `${event.type}:${id}` : null;
    }
    case "approval_requested":
    case "approval_decided": {
      const id = text(d.id);
      return id ? `${event.type}:${id}` : null;
    }
    case "message_accepted":
    case "message_classified":
    case "message_done": {
      const id = text(d.request_id);
      return id ? `message_received:${id}` : null;
    }
    default:
      return null;
  }
}

/**
 * The overview's one activity feed: what the butlers recorded (the timeline, re-read on
 * every event that changes it) merged with the live events that are not in it yet or never
 * will be. An event is shown once: a live event whose recorded row has arrived gives way
 * to it, and inbox updates of one message replace each other.
 */
export function mergeFeed(recorded: TimelineEvent[], live: LiveEvent[], size = FEED_SIZE): FeedEntry[] {
  const entries = new Map<string, FeedEntry>();
  for (const t of recorded) {
    const key = `${t.kind}:${t.ref}`;
    if (entries.has(key)) continue;
    entries.set(key, {
      key,
      at: Date.parse(t.at),
      butler: t.butler,
      kind: t.kind,
      ref: t.ref,
      text: t.summary,
      status: t.status || null,
      source: "recorded",
    });
  }
  // Newest first: the first live event of a key is its latest state.
  for (const e of live) {
    const recordedKey = timelineKeyOf(e);
    const key = recordedKey ?? `${e.type}:${e.id ?? e.receivedAt}`;
    if (entries.has(key)) continue;
    const [kind, ref] = recordedKey ? [recordedKey.slice(0, recordedKey.indexOf(":")), recordedKey.slice(recordedKey.indexOf(":") + 1)] : [e.type, ""];
    entries.set(key, {
      key,
      at: e.receivedAt,
      butler: typeof e.data.butler === "string" ? e.data.butler : null,
      kind,
      ref,
      text: describe(e),
      status: null,
      source: "live",
    });
  }
  return [...entries.values()].sort((a, b) => b.at - a.at).slice(0, size);
}

const KIND_NAMES: Record<string, string> = {
  session_start: "session started",
  session_end: "session ended",
  approval_requested: "approval requested",
  approval_decided: "approval decided",
  message_received: "message",
  route: "route",
  delivery: "delivery",
  butler_start: "started",
};

export function ActivityFeed() {
  const { events } = useLive();
  const history = useTimeline({ limit: FEED_SIZE });
  const entries = mergeFeed(history.data?.data ?? [], events);
  return (
    <section aria-labelledby="activity">
      <h2 id="activity">Activity</h2>
      <p className="muted small">
        What the butlers recorded, newest first, updated live. <Link to="/sessions">All sessions</Link>
      </p>
      <DataState loading={history.isLoading && !events.length} error={history.error} empty={!entries.length} emptyText="Nothing has happened yet.">
        <ol className="feed" aria-label="Activity" aria-live="polite">
          {entries.map((e) => (
            <li key={e.key} data-kind={e.kind} data-ref={e.ref || undefined} data-source={e.source}>
              <time dateTime={new Date(e.at).toISOString()}>{ago(new Date(e.at).toISOString())}</time>{" "}
              {e.source === "recorded" ? (
                <>
                  <strong>{e.butler}</strong> {KIND_NAMES[e.kind] ?? e.kind}: {e.text}{" "}
                  {e.status ? <StatusBadge status={e.status} /> : null}
                </>
              ) : (
                e.text
              )}
            </li>
          ))}
        </ol>
      </DataState>
    </section>
  );
}
