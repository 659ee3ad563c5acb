import { describe, expect, it } from "vitest";
import { SseParser } from "./sse";

describe("SseParser", () => {
  it("parses the stream's frames across chunk boundaries", () => {
    const parser = new SseParser();
    expect(parser.push('id: 7\nevent: app.phase\ndata: {"a"')).toEqual([]);
    expect(parser.push(":1}\n\n")).toEqual([{ id: "7", event: "app.phase", data: '{"a":1}' }]);
  });

  it("skips heartbeat comments and joins multi-line data", () => {
    const parser = new SseParser();
    const out = parser.push(":heartbeat\n\ndata: one\ndata: two\n\n");
    expect(out).toEqual([{ id: undefined, event: "message", data: "one\ntwo" }]);
  });

  it("keeps the last id for frames without one, and handles CRLF split between chunks", () => {
    const parser = new SseParser();
    parser.push("id: 3\r\ndata: a\r\n\r");
    const out = parser.push("\ndata: b\r\n\r\n");
    expect(out.map((m) => [m.id, m.data])).toEqual([
      ["3", "a"],
      ["3", "b"],
    ]);
  });

  it("ignores an event name without data", () => {
    expect(new SseParser().push("event: x\n\n")).toEqual([]);
  });
});
