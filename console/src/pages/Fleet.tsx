// The fleet: the organization's open alerts and its clusters with state, health, capacity and
// heartbeat, live; registration of a new cluster, whose install command is shown once.
import { useMemo, useState, type FormEvent } from "react";
import { Link } from "react-router";
import { api, ok, ApiFailure, type Cluster, type Registration } from "../api/client";
import { useAccount, useOrgPath, useOrgRole } from "../account";
import { useLoad } from "../load";
import { store, useStore } from "../live/store";
import { canWrite } from "../roles";
import { Capacity, ErrorNote, GIB, Phase, When } from "../components/ui";
import { useAlerts } from "./Alerts";

export function useClusters(org: string) {
  const loaded = useLoad(async () => {
    const clusters = ok(await api.GET("/api/v1/orgs/{org}/clusters", { params: { path: { org } } }));
    store.dispatch({ type: "clusters", clusters });
    return clusters.map((c) => c.id);
  }, [org]);
  const all = useStore((s) => s.clusters);
  const clusters = useMemo(
    () => (loaded.data ?? []).map((id) => all[id]).filter((c): c is Cluster => Boolean(c)),
    [loaded.data, all],
  );
  return { ...loaded, clusters };
}

export function Fleet() {
  const to = useOrgPath();
  const { org } = useAccount();
  const role = useOrgRole();
  const { clusters, error, reload } = useClusters(org);
  const open = useAlerts(org, "open").data ?? [];
  return (
    <>
      <h1>Fleet</h1>
      <ErrorNote error={error} />
      {open.length > 0 && (
        <p className="alert" role="note" data-testid="open-alerts">
          <Link to={to("/alerts?state=open")}>
            {open.length} open alert{open.length > 1 ? "s" : ""}
          </Link>
          : {open.map((a) => `${a.subject_name} (${a.kind.replaceAll("_", " ")})`).join(", ")}
        </p>
      )}
      {canWrite(role) && <Register org={org} onDone={reload} />}
      <ul className="cards" aria-label="Clusters">
        {clusters.map((c) => (
          <ClusterCard key={c.id} cluster={c} />
        ))}
      </ul>
      {clusters.length === 0 && !error && <p>No clusters registered yet.</p>}
    </>
  );
}

function ClusterCard({ cluster: c }: { cluster: Cluster }) {
  const to = useOrgPath();
  const alerts = c.health.filter((h) => h.status !== "ok");
  return (
    <li className="card" data-testid={`cluster-${c.name}`}>
      <h2>
        <Link to={to(`/clusters/${c.id}`)}>{c.display_name || c.name}</Link> <Phase phase={c.state} />
      </h2>
      <CapacityBars cluster={c} />
      <p>
        Last heartbeat: <When at={c.last_heartbeat} />
      </p>
      <ul className="checks" aria-label={`Health checks of ${c.name}`}>
        {c.health.map((h) => (
          <li key={h.name}>
            <Phase phase={h.status} /> {h.name}
            {h.message && `: ${h.message}`}
          </li>
        ))}
      </ul>
      {alerts.length > 0 && (
        <p className="alert" role="note">
          {alerts.length} open alert{alerts.length > 1 ? "s" : ""}
        </p>
      )}
    </li>
  );
}

export function CapacityBars({ cluster: c }: { cluster: Cluster }) {
  return (
    <div>
      <Capacity label="CPU" used={c.cpu_used} total={c.cpu_total} unit="cores" />
      <Capacity label="Memory" used={Number((c.mem_used / GIB).toFixed(2))} total={Number((c.mem_total / GIB).toFixed(2))} unit="GiB" />
      <Capacity label="Nodes" used={c.node_count} total={c.desired_node_count ?? c.node_count} unit="nodes" full />
    </div>
  );
}

function Register({ org, onDone }: { org: string; onDone: () => void }) {
  const [answer, setAnswer] = useState<Registration>();
  const [error, setError] = useState<Error>();
  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const name = String(new FormData(form).get("name"));
    setError(undefined);
    try {
      const result = await api.POST("/api/v1/orgs/{org}/clusters", { params: { path: { org } }, body: { name } });
      setAnswer(ok(result));
      form.reset();
      onDone();
    } catch (err) {
      setError(err as ApiFailure);
    }
  };
  return (
    <section aria-labelledby="register">
      <h2 id="register">Register a cluster</h2>
      <form onSubmit={submit} className="row">
        <label>
          Name <input name="name" required pattern={"[a-z0-9]([a-z0-9\\-]*[a-z0-9])?"} />
        </label>
        <button type="submit" className="primary">
          Register
        </button>
      </form>
      <ErrorNote error={error} />
      {answer && (
        <div className="once" data-testid="install-command">
          <p>Run this on the cluster to install its agent. The token is shown only now.</p>
          <pre>{answer.helm_install_command}</pre>
          <button type="button" onClick={() => setAnswer(undefined)}>
            Done
          </button>
        </div>
      )}
    </section>
  );
}
