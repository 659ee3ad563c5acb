import { describe, expect, it } from "vitest";
import { SseParser } from "../live/sse";
import { FormError, atNewest, containersOf, describeEnd, keep, logQuery, readMessage, type LogLine } from "./lines";

const form = { component: "web", follow: false, since: "", tail: "", previous: false };
const line = (seq: number, container = "web"): LogLine => ({ seq, pod: "p", container, line: `l${seq}` });

describe("the log query", () => {
  it("sends only what the reader picked", () => {
    expect(logQuery(form)).toEqual({ component: "web" });
    expect(logQuery({ ...form, follow: true, since: "1h", tail: " 200 ", previous: true })).toEqual({
      component: "web",
      follow: "true",
      since: "1h",
      tail: "200",
      previous: "true",
    });
  });

  it("refuses a tail the API would refuse, naming the field", () => {
    for (const tail of ["0", "10001", "-3", "12a", "1.5"]) {
      expect(() => logQuery({ ...form, tail })).toThrow(FormError);
      try {
        logQuery({ ...form, tail });
      } catch (e) {
        expect((e as FormError).field).toBe("tail");
      }
    }
    expect(logQuery({ ...form, tail: "10000" }).tail).toBe("10000");
  });

  it("refuses a since that is not one of the choices", () => {
    expect(() => logQuery({ ...form, since: "--all" })).toThrow(/since/);
  });
});

describe("the stream's messages", () => {
  it("reads the API's log and end events across chunk boundaries", () => {
    const parser = new SseParser();
    const body =
      'event: log\ndata: {"timestamp":"2026-01-01T00:00:00Z","pod":"web-1","container":"web","line":"GET / 200"}\n\n' +
      ":heartbeat\n\n" +
      'event: end\ndata: {"reason":"eof","message":"the pods\' logs ended"}\n\n';
    const messages = [...parser.push(body.slice(0, 50)), ...parser.push(body.slice(50))];
    expect(messages.map((m, i) => readMessage(m, i))).toEqual([
      { line: { seq: 0, timestamp: "2026-01-01T00:00:00Z", pod: "web-1", container: "web", line: "GET / 200" } },
      { end: { reason: "eof", message: "the pods' logs ended" } },
    ]);
  });

  it("ignores what is not the API's JSON", () => {
    expect(readMessage({ event: "log", data: "not json" }, 0)).toBeNull();
    expect(readMessage({ event: "log", data: "3" }, 0)).toBeNull();
    expect(readMessage({ event: "other", data: "{}" }, 0)).toBeNull();
    expect(readMessage({ event: "log", data: '{"line":7}' }, 1)).toEqual({ line: { seq: 1, timestamp: undefined, pod: "", container: "", line: "" } });
  });

  it("says why a stream ended", () => {
    expect(describeEnd({ reason: "limit", message: "" })).toBe("the stream fell behind and was cut");
    expect(describeEnd({ reason: "odd", message: "why" })).toBe("odd: why");
  });
});

describe("the window of lines", () => {
  it("keeps the newest lines up to its bound and counts the dropped", () => {
    let window = { lines: [] as LogLine[], dropped: 0 };
    window = keep(window, [line(1), line(2), line(3)], 4);
    expect(window.dropped).toBe(0);
    window = keep(window, [line(4), line(5), line(6)], 4);
    expect(window.lines.map((l) => l.seq)).toEqual([3, 4, 5, 6]);
    expect(window.dropped).toBe(2);
    expect(keep(window, [], 4)).toBe(window);
  });

  it("lists the containers seen, with those known before", () => {
    expect(containersOf([line(1, "web"), line(2, "proxy"), line(3, "web")], ["init"])).toEqual(["init", "proxy", "web"]);
  });
});

describe("following the newest line", () => {
  it("keeps following at the bottom and stops when the reader scrolls up", () => {
    expect(atNewest({ scrollHeight: 1000, scrollTop: 600, clientHeight: 400 })).toBe(true);
    expect(atNewest({ scrollHeight: 1000, scrollTop: 580, clientHeight: 400 })).toBe(true);
    expect(atNewest({ scrollHeight: 1000, scrollTop: 300, clientHeight: 400 })).toBe(false);
    // A view shorter than its box is at its newest line.
    expect(atNewest({ scrollHeight: 200, scrollTop: 0, clientHeight: 400 })).toBe(true);
  });
});
