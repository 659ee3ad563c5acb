// The one live subscription of the console: `GET /api/v1/events/stream` read with `fetch`,
// resumed with `Last-Event-ID` after a dropped connection, with its state for the header's
// indicator.
import { session } from "../api/session";
import { SseParser } from "./sse";
import type { ConnectionState, LiveEvent } from "./types";

export type Handlers = {
  event(event: LiveEvent): void;
  state(state: ConnectionState): void;
};

/// Backoff between reconnects: short at first, capped, so a restarted server is found fast.
function delay(attempt: number): number {
  return Math.min(500 * 2 ** attempt, 8000);
}

/// Opens the stream and keeps it open until `signal` aborts.
export async function connect(handlers: Handlers, signal: AbortSignal): Promise<void> {
  let lastId: string | undefined;
  let attempt = 0;
  handlers.state("connecting");
  while (!signal.aborted) {
    try {
      const token = await session.token();
      if (!token) {
        handlers.state("offline");
        return;
      }
      const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
      if (lastId) headers["Last-Event-ID"] = lastId;
      const response = await fetch("/api/v1/events/stream", { headers, signal });
      if (response.status === 401) {
        await session.refresh();
      } else if (response.ok && response.body) {
        handlers.state("live");
        attempt = 0;
        const parser = new SseParser();
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const message of parser.push(value)) {
            if (message.id) lastId = message.id;
            try {
              handlers.event(JSON.parse(message.data) as LiveEvent);
            } catch {
              // A frame that is not JSON is not ours to show.
            }
          }
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    if (signal.aborted) return;
    handlers.state("reconnecting");
    await new Promise((r) => setTimeout(r, delay(attempt++)));
  }
}
