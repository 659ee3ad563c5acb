// One cluster: capacity, health, its projects; token rotation and deletion for admins (the
// API's reason shown when the deletion is refused).
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, ok, type Schemas } from "../api/client";
import { useAccount, useOrgPath } from "../account";
import { useLoad } from "../load";
import { store, useStore } from "../live/store";
import { canAdmin, roleOf } from "../roles";
import { ConfirmButton } from "../components/Confirm";
import { ErrorNote, Phase, When, Missing } from "../components/ui";
import { CapacityBars } from "./Fleet";

export function ClusterDetail() {
  const to = useOrgPath();
  const { id = "" } = useParams();
  const navigate = useNavigate();
  const { me, orgs } = useAccount();
  const loaded = useLoad(async () => {
    const cluster = ok(await api.GET("/api/v1/clusters/{id}", { params: { path: { id } } }));
    store.dispatch({ type: "clusters", clusters: [cluster] });
    const projects = ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org: cluster.org } } }));
    return projects.filter((p) => p.cluster_id === id || p.cluster === cluster.name);
  }, [id]);
  const cluster = useStore((s) => s.clusters[id]);
  const [rotation, setRotation] = useState<Schemas["RotationResponse"]>();
  const [failure, setFailure] = useState<Error>();
  if (!cluster) return <Missing title="Cluster" error={loaded.error} />;
  const role = roleOf({
    platformAdmin: me.platform_admin,
    username: me.username,
    orgRole: orgs.find((o) => o.name === cluster.org)?.role,
    members: [cluster.members],
  });
  const act = async (action: () => Promise<void>) => {
    setFailure(undefined);
    try {
      await action();
    } catch (e) {
      setFailure(e as Error);
    }
  };
  return (
    <>
      <h1>
        Cluster {cluster.display_name || cluster.name} <Phase phase={cluster.state} />
      </h1>
      <dl className="facts">
        <dt>Kubernetes</dt>
        <dd>{cluster.kubernetes_version ?? "unknown"}</dd>
        <dt>Agent</dt>
        <dd>{cluster.agent_version ?? "not connected yet"}</dd>
        <dt>Token version</dt>
        <dd data-testid="token-version">{cluster.token_version}</dd>
        <dt>Last heartbeat</dt>
        <dd>
          <When at={cluster.last_heartbeat} />
        </dd>
      </dl>
      <h2>Capacity</h2>
      <CapacityBars cluster={cluster} />
      <h2>Health</h2>
      <ul className="checks">
        {cluster.health.map((h) => (
          <li key={h.name}>
            <Phase phase={h.status} /> {h.name}: {h.message}
          </li>
        ))}
      </ul>
      <h2>Projects</h2>
      <ul>
        {(loaded.data ?? []).map((p) => (
          <li key={p.id}>
            <Link to={to(`/projects/${encodeURIComponent(p.name)}/apps`)}>{p.name}</Link> (namespace {p.namespace}) <Phase phase={p.phase} />
          </li>
        ))}
      </ul>
      {canAdmin(role) && (
        <section aria-label="Administration" className="row">
          <ConfirmButton
            label="Rotate token"
            question="The old token stops working and the agent's session is cut at once. Rotate?"
            onConfirm={() =>
              act(async () => {
                const rotated = ok(await api.POST("/api/v1/clusters/{id}/rotate-token", { params: { path: { id } } }));
                setRotation(rotated);
                // The facts above show the new version too, not the one loaded with the page.
                store.dispatch({ type: "clusters", clusters: [{ ...cluster, token_version: rotated.token_version }] });
              })
            }
          />
          <ConfirmButton
            danger
            label="Delete cluster"
            question={`Delete the cluster ${cluster.name}?`}
            onConfirm={() =>
              act(async () => {
                ok(await api.DELETE("/api/v1/clusters/{id}", { params: { path: { id } } }));
                navigate(to("/"));
              })
            }
          />
        </section>
      )}
      <ErrorNote error={failure} />
      {rotation && (
        <div className="once" data-testid="install-command">
          <p>The new install command (token version {rotation.token_version}), shown only now:</p>
          <pre>{rotation.helm_install_command}</pre>
        </div>
      )}
    </>
  );
}
