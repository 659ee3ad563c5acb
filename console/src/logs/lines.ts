// The log viewer's pure part: the query a reader asks for, checked before it is sent; the
// stream's messages turned into lines; and the bounded window of lines the page keeps.
import type { SseMessage } from "../live/sse";

/// One line as the API sends it (`event: log`), numbered in arrival order for React's keys.
export type LogLine = { seq: number; timestamp?: string; pod: string; container: string; line: string };

/// Why a stream stopped (`event: end`): `eof`, `limit`, `forbidden`, `session_dropped`, …
export type LogEnd = { reason: string; message: string };

/// The most lines kept: older lines are dropped (and counted) so a long follow stays light.
export const MAX_LINES = 5000;

/// What the reader picked in the form, as typed.
export type LogForm = { component: string; follow: boolean; since: string; tail: string; previous: boolean };

/// The query of `GET /api/v1/apps/{id}/logs`.
export type LogQuery = { component?: string; follow?: string; since?: string; tail?: string; previous?: string };

/// A value of the form the API would refuse, naming the field.
export class FormError extends Error {
  constructor(
    readonly field: keyof LogForm,
    message: string,
  ) {
    super(message);
  }
}

/// The `since` choices the form offers (the API takes `30s`, `10m`, `2h`, `1d`, at most 30 days).
export const SINCE_CHOICES = ["", "5m", "15m", "1h", "6h", "1d", "7d"];

/// The largest `tail` the API takes.
const MAX_TAIL = 10_000;

/// The form checked and turned into the query; a bad value throws a `FormError` naming it.
export function logQuery(form: LogForm): LogQuery {
  const query: LogQuery = {};
  if (form.component) query.component = form.component;
  if (form.follow) query.follow = "true";
  if (form.previous) query.previous = "true";
  if (form.since) {
    if (!SINCE_CHOICES.includes(form.since)) throw new FormError("since", `since: one of ${SINCE_CHOICES.filter(Boolean).join(", ")}`);
    query.since = form.since;
  }
  const tail = form.tail.trim();
  if (tail) {
    if (!/^[0-9]+$/.test(tail) || Number(tail) < 1 || Number(tail) > MAX_TAIL) {
      throw new FormError("tail", `tail: a whole number of lines from 1 to ${MAX_TAIL}`);
    }
    query.tail = String(Number(tail));
  }
  return query;
}

/// A message of the stream: a line, the end, or nothing the viewer shows (a frame it does not
/// know, or data that is not the API's JSON).
export function readMessage(message: SseMessage, seq: number): { line: LogLine } | { end: LogEnd } | null {
  let data: Record<string, unknown>;
  try {
    data = JSON.parse(message.data) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (typeof data !== "object" || data === null) return null;
  const text = (key: string) => (typeof data[key] === "string" ? (data[key] as string) : "");
  if (message.event === "log") {
    const timestamp = text("timestamp") || undefined;
    return { line: { seq, timestamp, pod: text("pod"), container: text("container"), line: text("line") } };
  }
  if (message.event === "end") return { end: { reason: text("reason") || "error", message: text("message") } };
  return null;
}

/// The window after `more` arrived: at most `max` lines, and how many were dropped in all.
export function keep(window: { lines: LogLine[]; dropped: number }, more: LogLine[], max = MAX_LINES): { lines: LogLine[]; dropped: number } {
  if (more.length === 0) return window;
  const all = window.lines.concat(more);
  const over = Math.max(0, all.length - max);
  return { lines: over ? all.slice(over) : all, dropped: window.dropped + over };
}

/// The containers seen in the lines, sorted (the container picker's choices).
export function containersOf(lines: LogLine[], known: string[] = []): string[] {
  const set = new Set(known);
  for (const l of lines) if (l.container) set.add(l.container);
  return [...set].sort();
}

/// Words for an end reason.
export function describeEnd(end: LogEnd): string {
  const why: Record<string, string> = {
    eof: "every container's log ended",
    limit: "the stream fell behind and was cut",
    forbidden: "you may no longer read these logs",
    session_dropped: "the cluster's connection ended",
    stopped: "stopped",
  };
  const head = why[end.reason] ?? end.reason;
  return end.message ? `${head}: ${end.message}` : head;
}

/// How close to the bottom (px) still counts as reading the newest lines.
const STICK = 32;

/// Whether a scrolled view shows its newest lines (then new lines keep it at the bottom; a
/// reader who scrolled up to read is left where they are).
export function atNewest(view: { scrollHeight: number; scrollTop: number; clientHeight: number }): boolean {
  return view.scrollHeight - view.scrollTop - view.clientHeight < STICK;
}
