// The Apps of the organization: phase, revision, drift and blocked badges, filtered by the API
// (`project_id`, `cluster_id`, `phase`) and paged with its `limit`/`continue` (one page of rows
// in the DOM, so 1,000 Apps stay fast). A project's Apps have their own address,
// `/orgs/{org}/projects/{project}/apps` (the project by name).
import { useMemo, useRef, useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, ok, type App, type AppPhase } from "../api/client";
import { useAccount, useOrgPath, useOrgRole } from "../account";
import { useLoad } from "../load";
import { store, useStore } from "../live/store";
import { canWrite } from "../roles";
import { Badge, ErrorNote, Head, Phase } from "../components/ui";
import { useClusters } from "./Fleet";

const PAGE = 100;
// The API's phases (`phase` of `GET /api/v1/apps`).
const PHASES: AppPhase[] = ["Pending", "Deploying", "Running", "Paused", "Failed", "Deleting"];

export function Apps() {
  const to = useOrgPath();
  const { org } = useAccount();
  const role = useOrgRole();
  const [params, setParams] = useSearchParams();
  const navigate = useNavigate();
  const { project: projectName } = useParams();
  const cluster = params.get("cluster_id") ?? "";
  const phase = params.get("phase") ?? "";
  // The `continue` tokens of the pages before this one, and this one's.
  const [pages, setPages] = useState<string[]>([]);
  const cursor = pages[pages.length - 1];
  const { clusters } = useClusters(org);
  // An event about an App this console has not loaded (one just created elsewhere) reloads
  // the page once, so new Apps appear without polling.
  const newest = useStore((s) => {
    for (let i = s.events.length - 1; i >= 0; i--) {
      const e = s.events[i]!;
      if (e.org === org && e.app_id && !s.apps[e.app_id] && !s.deleted[e.app_id]) return e.id;
    }
    return 0;
  });
  // Only a newer such event reloads (loading the App makes its event "seen").
  const unseenHigh = useRef(0);
  if (newest > unseenHigh.current) unseenHigh.current = newest;
  const unseen = unseenHigh.current;
  const projects = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })), [org]);
  const named = projectName === undefined ? undefined : projects.data?.find((p) => p.name === projectName);
  const project = projectName === undefined ? (params.get("project_id") ?? "") : (named?.id ?? "");
  const page = useLoad(async () => {
    // A project named in the address is asked for by its id, once the projects are known.
    if (projectName !== undefined && !named) {
      if (projects.data) throw new Error(`${org} has no project ${projectName}`);
      return { ids: [], next: undefined };
    }
    const list = ok(
      await api.GET("/api/v1/apps", {
        params: {
          query: {
            org,
            project_id: project || undefined,
            cluster_id: cluster || undefined,
            // From the address bar: a phase the API does not know is its 422 to show.
            phase: (phase || undefined) as AppPhase | undefined,
            limit: PAGE,
            continue: cursor,
          },
        },
      }),
    );
    store.dispatch({ type: "apps", apps: list.items });
    return { ids: list.items.map((a) => a.id), next: list.continue ?? undefined };
  }, [org, project, cluster, phase, cursor, unseen, projectName, projects.data]);
  const all = useStore((s) => s.apps);
  const rows = useMemo(
    () =>
      (page.data?.ids ?? [])
        .map((id) => all[id])
        // The API filtered the page; an App whose phase changed since stays on it until the
        // next load, so a row never jumps away under the pointer.
        .filter((a): a is App => Boolean(a)),
    [page.data, all],
  );
  const filter = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next);
    setPages([]);
  };
  // The project is part of the address, not a query parameter.
  const pickProject = (id: string) => {
    const next = new URLSearchParams(params);
    next.delete("project_id");
    const name = projects.data?.find((p) => p.id === id)?.name;
    const search = next.toString() ? `?${next}` : "";
    navigate((name ? to(`/projects/${encodeURIComponent(name)}/apps`) : to("/apps")) + search);
    setPages([]);
  };
  return (
    <>
      <h1>{projectName === undefined ? "Apps" : `Apps of project ${projectName}`}</h1>
      {canWrite(role) && (
        <p className="row">
          <Link to={to("/apps/new")} className="button primary">
            New App
          </Link>
          <Link to={to("/templates")} className="button">
            Deploy from a template
          </Link>
        </p>
      )}
      <form className="row filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Project{" "}
          <select value={project} onChange={(e) => pickProject(e.target.value)}>
            <option value="">all</option>
            {(projects.data ?? []).map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Cluster{" "}
          <select value={cluster} onChange={(e) => filter("cluster_id", e.target.value)}>
            <option value="">all</option>
            {clusters.map((c) => (
              <option key={c.id} value={c.id}>
                {c.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Phase{" "}
          <select value={phase} onChange={(e) => filter("phase", e.target.value)}>
            <option value="">all</option>
            {PHASES.map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </label>
      </form>
      <ErrorNote error={page.error} />
      <table data-testid="apps-table">
        <Head columns={["App", "Project", "Phase", "Revision", "Sync"]} />
        <tbody>
          {rows.map((a) => (
            <tr key={a.id} data-testid={`app-row-${a.name}`}>
              <td>
                <Link to={to(`/apps/${a.id}`)}>{a.name}</Link>
              </td>
              <td>{a.project}</td>
              <td>
                <Phase phase={a.phase} />
              </td>
              <td>
                <code>{a.revision?.slice(0, 12) ?? "none"}</code>
              </td>
              <td>
                {a.sync.drift_detected && <Badge tone="warn">drift</Badge>}{" "}
                {a.sync.drift_class === "blocked_sync" && <Badge tone="bad">blocked</Badge>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!page.loading && rows.length === 0 && <p>No Apps here.</p>}
      <nav aria-label="Pages" className="row">
        <button type="button" disabled={pages.length === 0} onClick={() => setPages(pages.slice(0, -1))}>
          Previous page
        </button>
        <span>Page {pages.length + 1}</span>
        <button type="button" disabled={!page.data?.next} onClick={() => page.data?.next && setPages([...pages, page.data.next])}>
          Next page
        </button>
      </nav>
    </>
  );
}
