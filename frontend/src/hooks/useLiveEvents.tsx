import { useQueryClient } from "@tanstack/react-query";
import { createContext, type ReactNode, useContext, useEffect, useState } from "react";

import { API_BASE } from "../api/client";
import { EVENT_TYPES, keysFor, type LiveEvent, parseEvent } from "../api/events";

export const FEED_LENGTH = 50;

export type Connection = "connecting" | "live" | "reconnecting" | "unsupported";

interface Live {
  connection: Connection;
  events: LiveEvent[];
}

const LiveContext = createContext<Live>({ connection: "connecting", events: [] });

/**
 * One EventSource for the whole app. Every event invalidates the queries it makes stale
 * (so pages update without a reload) and goes into a short activity feed. The browser
 * reconnects by itself, sending Last-Event-ID; the server replays what was missed.
 * Until an event with an id has arrived there is no Last-Event-ID to send: a connection
 * then makes every query stale, since what pages read before the stream was subscribed
 * may have changed with no event left to say so.
 */
export function LiveEventsProvider({ children }: { children: ReactNode }) {
  const client = useQueryClient();
  const [live, setLive] = useState<Live>(() => ({
    connection: typeof EventSource === "undefined" ? "unsupported" : "connecting",
    events: [],
  }));

  useEffect(() => {
    if (typeof EventSource === "undefined") return;
    const source = new EventSource(`${API_BASE}/events`);
    let resumable = false; // an event with an id arrived: a reconnect replays from it
    source.onopen = () => setLive((l) => ({ ...l, connection: "live" }));
    source.onerror = () => setLive((l) => ({ ...l, connection: "reconnecting" }));
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (raw) => {
        const event = parseEvent(type, raw as MessageEvent<string>);
        const keys = type === "connected" && !resumable ? "all" : keysFor(type, event.data);
        if (event.id) resumable = true;
        if (keys === "all") {
          void client.invalidateQueries();
        } else {
          for (const queryKey of keys) void client.invalidateQueries({ queryKey });
        }
        if (type === "connected") {
          setLive((l) => ({ ...l, connection: "live" }));
          return;
        }
        setLive((l) => ({ ...l, events: [event, ...l.events].slice(0, FEED_LENGTH) }));
      });
    }
    return () => source.close();
  }, [client]);

  return <LiveContext.Provider value={live}>{children}</LiveContext.Provider>;
}

export function useLive(): Live {
  return useContext(LiveContext);
}
