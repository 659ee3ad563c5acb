// An App's container logs: a component, how far back (since, tail), followed live or not,
// filtered by container; the newest lines kept in view unless the reader scrolls up, and a
// bounded window of lines in memory however long the stream runs.
import { useEffect, useLayoutEffect, useRef, useState, type FormEvent } from "react";
import { Link, Navigate, useParams } from "react-router";
import { api, ok } from "../api/client";
import { useAccount, useOrgPath } from "../account";
import { orgPath } from "../paths";
import { useLoad } from "../load";
import { FormError, SINCE_CHOICES, atNewest, containersOf, describeEnd, keep, logQuery, type LogEnd, type LogForm, type LogLine } from "../logs/lines";
import { readLogs } from "../logs/read";
import { ErrorNote, Missing } from "../components/ui";

export function AppLogs() {
  const { id = "" } = useParams();
  const to = useOrgPath();
  const { org } = useAccount();
  const app = useLoad(async () => ok(await api.GET("/api/v1/apps/{id}", { params: { path: { id } } })), [id]);
  const [form, setForm] = useState<LogForm>({ component: "", follow: true, since: "", tail: "200", previous: false });
  const [container, setContainer] = useState("");
  const [stamps, setStamps] = useState(false);
  const [window, setWindow] = useState<{ lines: LogLine[]; dropped: number }>({ lines: [], dropped: 0 });
  const [running, setRunning] = useState(false);
  const [end, setEnd] = useState<LogEnd>();
  const [failure, setFailure] = useState<Error>();
  const reading = useRef<AbortController | null>(null);
  const view = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const [behind, setBehind] = useState(false);

  const components = (app.data?.components ?? []).map((c) => c.name);
  // The API's default: the App's only workload component; several need a choice.
  const workload = app.data?.components.find((c) => c.type !== "addon")?.name ?? components[0] ?? "";
  const component = form.component || workload;

  const start = (values: LogForm) => {
    let query;
    try {
      query = logQuery(values);
    } catch (e) {
      setFailure(e as Error);
      return;
    }
    reading.current?.abort();
    const abort = new AbortController();
    reading.current = abort;
    setFailure(undefined);
    setEnd(undefined);
    setWindow({ lines: [], dropped: 0 });
    stick.current = true;
    setBehind(false);
    setRunning(true);
    readLogs(id, query, abort.signal, {
      lines: (more) => setWindow((w) => keep(w, more)),
      end: (e) => setEnd(e),
    })
      .catch((e: Error) => {
        if (!abort.signal.aborted) setFailure(e);
      })
      .finally(() => {
        if (reading.current === abort) setRunning(false);
      });
  };
  const stop = () => {
    reading.current?.abort();
    reading.current = null;
    setRunning(false);
    setEnd({ reason: "stopped", message: "" });
  };

  // Opening the page follows the default component's newest lines; leaving it ends the stream.
  const ready = app.data?.org === org;
  useEffect(() => {
    if (ready) start({ ...form, component });
    return () => reading.current?.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [ready]);

  const shown = container ? window.lines.filter((l) => l.container === container) : window.lines;
  useLayoutEffect(() => {
    const el = view.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [shown]);
  const onScroll = () => {
    const el = view.current;
    if (!el) return;
    stick.current = atNewest(el);
    setBehind(!stick.current);
  };
  const toNewest = () => {
    stick.current = true;
    setBehind(false);
    if (view.current) view.current.scrollTop = view.current.scrollHeight;
  };

  if (!app.data) return <Missing title="Logs" error={app.error} />;
  if (app.data.org !== org) return <Navigate replace to={orgPath(app.data.org, `/apps/${id}/logs`)} />;
  const set = (patch: Partial<LogForm>) => setForm((f) => ({ ...f, ...patch }));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    start({ ...form, component });
  };
  const bad = failure instanceof FormError ? failure.field : null;
  return (
    <>
      <nav aria-label="Breadcrumb" className="crumbs">
        <Link to={to("/apps")}>Apps</Link> / <Link to={to(`/apps/${id}`)}>{app.data.name}</Link> / logs
      </nav>
      <h1>Logs of {app.data.name}</h1>
      <form className="card toolbar" aria-label="Log options" onSubmit={submit}>
        <label>
          Component
          <select value={component} onChange={(e) => set({ component: e.target.value })}>
            {components.map((c) => (
              <option key={c}>{c}</option>
            ))}
          </select>
        </label>
        <label>
          Container
          <select value={container} onChange={(e) => setContainer(e.target.value)}>
            <option value="">all</option>
            {containersOf(window.lines, container ? [container] : []).map((c) => (
              <option key={c}>{c}</option>
            ))}
          </select>
        </label>
        <label>
          Since
          <select value={form.since} onChange={(e) => set({ since: e.target.value })} aria-invalid={bad === "since"}>
            {SINCE_CHOICES.map((s) => (
              <option key={s} value={s}>
                {s || "any time"}
              </option>
            ))}
          </select>
        </label>
        <label>
          Tail
          <input className="narrow" inputMode="numeric" value={form.tail} onChange={(e) => set({ tail: e.target.value })} aria-invalid={bad === "tail"} placeholder="all" />
        </label>
        <label className="check">
          <input type="checkbox" checked={form.follow} onChange={(e) => set({ follow: e.target.checked })} /> Follow
        </label>
        <label className="check">
          <input type="checkbox" checked={form.previous} onChange={(e) => set({ previous: e.target.checked })} /> Previous instance
        </label>
        <label className="check">
          <input type="checkbox" checked={stamps} onChange={(e) => setStamps(e.target.checked)} /> Timestamps
        </label>
        <button type="submit" className="primary">
          {running ? "Restart" : "Show logs"}
        </button>
        {running && (
          <button type="button" onClick={stop}>
            Stop
          </button>
        )}
      </form>
      <ErrorNote error={failure} />
      <p role="status" className="muted" data-testid="log-state">
        {running ? (form.follow ? "following" : "reading") : end ? `ended: ${describeEnd(end)}` : "not reading"} · {shown.length} lines
        {window.dropped > 0 && ` (${window.dropped} older lines dropped)`}
      </p>
      <div className="logview" role="log" aria-label="Log lines" tabIndex={0} ref={view} onScroll={onScroll} data-testid="log-lines">
        {shown.length === 0 && <div className="empty">{running ? "Waiting for lines…" : "No lines."}</div>}
        {shown.map((l) => (
          <div key={l.seq} className="logline">
            {stamps && l.timestamp && <time dateTime={l.timestamp}>{l.timestamp} </time>}
            <span className="source">
              {l.pod}/{l.container}
            </span>{" "}
            <span>{l.line}</span>
          </div>
        ))}
      </div>
      {behind && (
        <button type="button" className="newest" onClick={toNewest}>
          Jump to the newest line
        </button>
      )}
    </>
  );
}
