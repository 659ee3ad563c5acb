// One App, live: components and their readiness, the exports wiring, conditions, drift, the
// timeline of its events, the history with diffs, and the actions the caller may take.
import { useMemo, useState } from "react";
import { Link, Navigate, useNavigate, useParams } from "react-router";
import { api, ok, type App } from "../api/client";
import { useAccount, useOrgPath } from "../account";
import { orgPath } from "../paths";
import { useLoad } from "../load";
import { store, useStore, type LiveEvent } from "../live/store";
import { canWrite, roleOf } from "../roles";
import { ConfirmButton } from "../components/Confirm";
import { Drift, describeDrift } from "../components/Drift";
import { History } from "../components/History";
import { ObjectTree } from "../components/ObjectTree";
import { Verification, describeVerdict } from "../components/Verification";
import { Badge, ErrorNote, Head, Phase, When, Missing } from "../components/ui";

export function AppDetail() {
  const to = useOrgPath();
  const { id = "" } = useParams();
  const navigate = useNavigate();
  const { me, orgs, org } = useAccount();
  const app = useStore((s) => s.apps[id]);
  const deleted = useStore((s) => s.deleted[id]);
  const allEvents = useStore((s) => s.events);
  const events = useMemo(() => allEvents.filter((e) => e.app_id === id), [allEvents, id]);
  const deploymentsSeen = useStore((s) => s.deployments[id] ?? 0);
  // Each event about the App reloads it once (component readiness and conditions are not in
  // the events); the phase and drift change in place before that from the event itself.
  const loaded = useLoad(async () => {
    const app = ok(await api.GET("/api/v1/apps/{id}", { params: { path: { id } } }));
    store.dispatch({ type: "apps", apps: [app] });
    const project = app.project_id
      ? await api.GET("/api/v1/projects/{id}", { params: { path: { id: app.project_id } } }).then(ok).catch(() => undefined)
      : undefined;
    return { project };
  }, [id, events.length]);
  const history = useLoad(
    async () => ok(await api.GET("/api/v1/apps/{id}/deployments", { params: { path: { id } } })),
    // A new deployment adds a row; a phase change settles the newest row's result.
    [id, deploymentsSeen, events.length],
  );
  const [failure, setFailure] = useState<Error>();
  if (deleted) return <p role="status">This App was deleted.</p>;
  if (!app) return <Missing title="App" error={loaded.error} />;
  // An address in another organization (one from before, or edited) shows the App in its own.
  if (app.org !== org) return <Navigate replace to={orgPath(app.org, `/apps/${id}`)} />;
  const role = roleOf({
    platformAdmin: me.platform_admin,
    username: me.username,
    orgRole: orgs.find((o) => o.name === app.org)?.role,
    members: [loaded.data?.project?.members ?? []],
  });
  const writer = canWrite(role);
  const act = (name: string, call: () => Promise<unknown>) => async () => {
    setFailure(undefined);
    try {
      await call();
      history.reload();
    } catch (e) {
      setFailure(new Error(`${name}: ${(e as Error).message}`));
    }
  };
  const path = { params: { path: { id } } };
  return (
    <>
      <h1>
        App {app.name} <Phase phase={app.phase} />{" "}
        {app.sync.drift_detected && <Badge tone="warn">drift</Badge>}
        {app.sync.drift_class === "blocked_sync" && <Badge tone="bad">blocked</Badge>}
      </h1>
      <p data-testid="app-message">{app.message}</p>
      <p className="row">
        <Link className="button" to={to(`/apps/${id}/logs`)}>
          Logs
        </Link>
      </p>
      <dl className="facts">
        <dt>Project</dt>
        <dd>{app.project}</dd>
        <dt>Revision</dt>
        <dd>
          <code data-testid="app-revision">{app.revision ?? "none"}</code>
        </dd>
        <dt>Observed</dt>
        <dd>
          <When at={app.observed_at} />
        </dd>
        {app.ingress_address && (
          <>
            <dt>Address</dt>
            <dd>{app.ingress_address}</dd>
          </>
        )}
      </dl>
      {writer && (
        <section aria-label="Actions" className="row">
          <Link className="button" to={to(`/apps/${id}/edit`)}>
            Edit
          </Link>
          {app.paused ? (
            <ConfirmButton label="Resume" question={`Resume ${app.name}?`} onConfirm={act("resume", async () => ok(await api.POST("/api/v1/apps/{id}/resume", path)))} />
          ) : (
            <ConfirmButton label="Pause" question={`Pause ${app.name}? Its workloads scale to zero.`} onConfirm={act("pause", async () => ok(await api.POST("/api/v1/apps/{id}/pause", path)))} />
          )}
          <ConfirmButton label="Redeploy" question={`Redeploy ${app.name}?`} onConfirm={act("redeploy", async () => ok(await api.POST("/api/v1/apps/{id}/redeploy", path)))} />
          <ConfirmButton
            danger
            label="Delete"
            question={`Delete ${app.name} and everything it runs?`}
            onConfirm={act("delete", async () => {
              ok(await api.DELETE("/api/v1/apps/{id}", path));
              navigate(to("/apps"));
            })}
          />
        </section>
      )}
      <ErrorNote error={failure} />
      <Components app={app} />
      <ObjectTree appId={id} refreshOn={events.length} />
      <h2>Conditions</h2>
      <table>
        <Head columns={["Type", "Status", "Reason", "Message"]} />
        <tbody>
          {app.conditions.map((c) => (
            <tr key={c.type}>
              <td>{c.type}</td>
              <td>{c.status}</td>
              <td>{c.reason}</td>
              <td>{c.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Drift sync={app.sync} />
      <Verification verdict={app.verdict} />
      <h2>Timeline</h2>
      <Timeline events={events} />
      <h2>History</h2>
      <ErrorNote error={history.error} />
      <History
        deployments={history.data ?? []}
        current={app.deployment_id}
        onRollback={writer ? (deployment) => act("rollback", async () => ok(await api.POST("/api/v1/apps/{id}/rollback", { ...path, body: { deployment_id: deployment } })))() : undefined}
      />
    </>
  );
}

function Components({ app }: { app: App }) {
  const wiring = app.components.flatMap((c) =>
    (c.workload_spec?.env ?? []).filter((e) => e.export_ref).map((e) => ({ component: c.name, env: e.name, ref: e.export_ref! })),
  );
  return (
    <>
      <h2>Components</h2>
      <table data-testid="components">
        <Head columns={["Component", "Kind", "Ready", "Replicas", "Message"]} />
        <tbody>
          {app.components.map((c) => {
            const status = app.component_status.find((s) => s.name === c.name);
            return (
              <tr key={c.name}>
                <td>{c.name}</td>
                <td>{c.type === "addon" ? `addon ${c.addon_spec?.definition ?? ""}` : (c.workload_spec?.image ?? "workload")}</td>
                <td>{status ? (status.ready ? <Badge tone="ok">ready</Badge> : <Badge tone="info">not ready</Badge>) : "unknown"}</td>
                <td>{status ? `${status.ready_replicas}/${status.desired_replicas}` : ""}</td>
                <td>{status?.message}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {wiring.length > 0 && (
        <>
          <h3>Exports wiring</h3>
          <ul data-testid="wiring">
            {wiring.map((w) => (
              <li key={`${w.component}/${w.env}`}>
                <code>{w.component}</code>: <code>{w.env}</code> ← <code>{w.ref.component}</code> export <code>{w.ref.export}</code>
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}

function describe(e: LiveEvent): string {
  switch (e.kind) {
    case "app.phase":
      return `phase ${String(e.previous ?? "none")} → ${String(e.phase)}${e.message ? `: ${String(e.message)}` : ""}`;
    case "deployment":
      return `deployment ${String(e.deployment_id ?? "")} (revision ${String(e.revision ?? "").slice(0, 12)})`;
    case "app.drift":
      return describeDrift(e);
    case "app.verification":
      return describeVerdict(e);
    case "alert":
      return `alert ${String(e.alert ?? "")} ${String(e.state ?? "")}${e.message ? `: ${String(e.message)}` : ""}`;
    default:
      return e.kind;
  }
}

function Timeline({ events }: { events: LiveEvent[] }) {
  if (events.length === 0) return <p>No events since this page opened.</p>;
  return (
    <ol className="timeline" data-testid="timeline" aria-live="polite" aria-label="Events of this App" tabIndex={0}>
      {[...events].reverse().map((e) => (
        <li key={e.id}>
          <When at={e.at} /> {describe(e)}
        </li>
      ))}
    </ol>
  );
}
