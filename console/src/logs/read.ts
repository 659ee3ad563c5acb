// Reads an App's log stream: `GET /api/v1/apps/{id}/logs` as Server-Sent Events through the
// typed client (its bearer token and one refresh on a 401), the body read as it arrives, the
// lines handed over one chunk at a time until the end event, the end of the body, or `signal`.
import { api, ok } from "../api/client";
import { SseParser } from "../live/sse";
import { readMessage, type LogEnd, type LogLine, type LogQuery } from "./lines";

export type LogHandlers = { lines(lines: LogLine[]): void; end(end: LogEnd): void };

/// Streams until the stream ends or `signal` aborts; an API refusal throws its `ApiFailure`.
export async function readLogs(id: string, query: LogQuery, signal: AbortSignal, handlers: LogHandlers): Promise<void> {
  const result = await api.GET("/api/v1/apps/{id}/logs", {
    params: { path: { id }, query },
    headers: { Accept: "text/event-stream" },
    parseAs: "stream",
    signal,
  });
  ok(result);
  // The body as fetch gave it (`parseAs: "stream"` leaves it unread).
  const body = result.response.body;
  if (!body) return handlers.end({ reason: "eof", message: "" });
  const parser = new SseParser();
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let seq = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return handlers.end({ reason: "eof", message: "the stream closed" });
      const lines: LogLine[] = [];
      let end: LogEnd | undefined;
      for (const message of parser.push(value)) {
        const read = readMessage(message, seq++);
        if (read && "line" in read) lines.push(read.line);
        else if (read && "end" in read) end = read.end;
      }
      if (lines.length > 0) handlers.lines(lines);
      if (end) return handlers.end(end);
    }
  } finally {
    // Leaving early (the reader stopped) closes the request, which stops the agent's stream.
    await reader.cancel().catch(() => undefined);
  }
}
