// The organization's alerts (a cluster silent past its heartbeat window, an App past its
// progress deadline, an App, addon or project whose deletion is past its deadline): filtered by state, acknowledged by members, live through the stream's
// `alert` events.
import { useEffect, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { api, ok, type Alert, type AlertState } from "../api/client";
import { useAccount, useOrgPath, useOrgRole } from "../account";
import { useLoad } from "../load";
import { useNewestEvent, useStore, type LiveEvent } from "../live/store";
import { canWrite } from "../roles";
import { Badge, ErrorNote, Head, When } from "../components/ui";

const STATES = ["open", "acknowledged", "resolved"] as const;

/// How often, a second apart, a list that does not show an alert event's change yet is loaded
/// again.
const RELOOKS = 5;

/// An organization's alerts, kept current by the stream (for the fleet page too). The stream's
/// `alert` event is derived from the subject's status as it changes, and the controllers write
/// the alert's row within a couple of seconds of it, so a list loaded on the event may not show
/// the change yet: it is loaded again until it does, a few times at most.
export function useAlerts(org: string, state?: string) {
  const newest = useNewestEvent((e) => e.kind === "alert" && e.org === org);
  const event = useStore((s) => s.events.find((e) => e.id === newest));
  const [relook, setRelook] = useState(0);
  useEffect(() => setRelook(0), [newest]);
  const loaded = useLoad(
    async () => ok(await api.GET("/api/v1/orgs/{org}/alerts", { params: { path: { org }, query: { state: (state || undefined) as AlertState | undefined } } })),
    [org, state, newest, relook],
  );
  const shown = !event || !loaded.data || (state !== "" && state !== undefined && state !== "open") || showsChange(loaded.data, event);
  useEffect(() => {
    if (shown || loaded.loading || relook >= RELOOKS) return;
    const timer = setTimeout(() => setRelook((n) => n + 1), 1000);
    return () => clearTimeout(timer);
  }, [shown, loaded.loading, relook]);
  return loaded;
}

/// Whether `alerts` shows what the event says of its subject: opened (an unresolved alert is
/// listed) or resolved (none is open any more).
function showsChange(alerts: Alert[], event: LiveEvent): boolean {
  const subject = event.app_id ?? event.cluster_id;
  const unresolved = alerts.some((a) => a.subject_id === subject && a.state !== "resolved");
  return event.state === "open" ? unresolved : !alerts.some((a) => a.subject_id === subject && a.state === "open");
}

function Subject({ alert: a }: { alert: Alert }) {
  const to = useOrgPath();
  if (a.subject_kind === "app") return <Link to={to(`/apps/${a.subject_id}`)}>App {a.subject_name}</Link>;
  if (a.subject_kind === "cluster") return <Link to={to(`/clusters/${a.subject_id}`)}>Cluster {a.subject_name}</Link>;
  if (a.subject_kind === "addon") return <Link to={to(`/addons/${a.subject_id}`)}>Addon {a.subject_name}</Link>;
  if (a.subject_kind === "project") return <Link to={to("/projects")}>Project {a.subject_name}</Link>;
  return <>{a.subject_name}</>;
}

export function Alerts() {
  const { org } = useAccount();
  const writer = canWrite(useOrgRole());
  const [params, setParams] = useSearchParams();
  const state = params.get("state") ?? "";
  const alerts = useAlerts(org, state);
  const [failure, setFailure] = useState<Error>();
  const acknowledge = async (id: string) => {
    setFailure(undefined);
    try {
      ok(await api.POST("/api/v1/orgs/{org}/alerts/{id}/ack", { params: { path: { org, id } } }));
      alerts.reload();
    } catch (e) {
      setFailure(e as Error);
    }
  };
  return (
    <>
      <h1>Alerts</h1>
      <form className="row filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          State{" "}
          <select value={state} onChange={(e) => setParams(e.target.value ? { state: e.target.value } : {})}>
            <option value="">all</option>
            {STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </form>
      <ErrorNote error={failure ?? alerts.error} />
      <table data-testid="alerts-table">
        <Head columns={writer ? ["Alert", "About", "Message", "Opened", "State", "Actions"] : ["Alert", "About", "Message", "Opened", "State"]} />
        <tbody>
          {(alerts.data ?? []).map((a) => (
            <tr key={a.id} data-testid={`alert-${a.subject_name}`}>
              <td>
                <Badge tone={a.severity === "critical" ? "bad" : "warn"}>{a.severity}</Badge> {a.kind.replaceAll("_", " ")}
              </td>
              <td>
                <Subject alert={a} />
              </td>
              <td>{a.message}</td>
              <td>
                <When at={a.opened_at} />
              </td>
              <td>
                {a.state}
                {a.acknowledged_by && ` by ${a.acknowledged_by}`}
                {a.resolved_at && (
                  <>
                    {" "}
                    (<When at={a.resolved_at} />
                    {a.resolution && `: ${a.resolution}`})
                  </>
                )}
              </td>
              {writer && (
                <td>
                  {a.state === "open" && (
                    <button type="button" onClick={() => acknowledge(a.id)}>
                      Acknowledge
                    </button>
                  )}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {alerts.data?.length === 0 && <p>No alerts here.</p>}
    </>
  );
}
