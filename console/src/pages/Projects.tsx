// The organization's projects and their namespaces; creating one on a cluster.
import { useState, type FormEvent } from "react";
import { Link } from "react-router";
import { api, ok } from "../api/client";
import { useAccount, useOrgPath, useOrgRole } from "../account";
import { useLoad } from "../load";
import { useStore } from "../live/store";
import { canAdmin, canWrite, roleOf } from "../roles";
import { ConfirmButton } from "../components/Confirm";
import { ErrorNote, Head, Phase } from "../components/ui";
import { useClusters } from "./Fleet";
import { BudgetLine, FencesForm, usedOf } from "./Fences";

export function Projects() {
  const to = useOrgPath();
  const { org, me } = useAccount();
  const orgRole = useOrgRole();
  const { clusters } = useClusters(org);
  const events = useStore((s) => s.events.length);
  const projects = useLoad(
    async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })),
    // A project turns Ready when its agent confirms the namespace; events reload the list.
    [org, events],
  );
  // What the projects use; only those with a role in the organization itself may read it.
  const usage = useLoad(
    async () => (orgRole ? ok(await api.GET("/api/v1/orgs/{org}/usage", { params: { path: { org } } })) : undefined),
    [org, orgRole, events],
  );
  const used = (name: string) => usage.data?.projects.find((p) => p.project === name);
  const [error, setError] = useState<Error>();
  const create = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const data = new FormData(form);
    setError(undefined);
    try {
      ok(
        await api.POST("/api/v1/orgs/{org}/projects", {
          params: { path: { org } },
          body: { name: String(data.get("name")), cluster_id: String(data.get("cluster")) },
        }),
      );
      form.reset();
      projects.reload();
    } catch (err) {
      setError(err as Error);
    }
  };
  return (
    <>
      <h1>Projects</h1>
      {canWrite(orgRole) && clusters.length > 0 && (
        <form onSubmit={create} className="row" aria-label="New project">
          <label>
            Name <input name="name" required />
          </label>
          <label>
            Cluster{" "}
            <select name="cluster">
              {clusters.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" className="primary">
            Create project
          </button>
        </form>
      )}
      <ErrorNote error={error ?? projects.error} />
      <BudgetLine usage={usage.data} />
      {canAdmin(orgRole) && (projects.data ?? []).length > 0 && (
        <FencesForm
          projects={projects.data ?? []}
          onSaved={() => {
            projects.reload();
            usage.reload();
          }}
        />
      )}
      <table>
        <Head columns={["Project", "Cluster", "Namespace", "Phase", "Network", "CPU", "Memory", "Members", "Actions"]} />
        <tbody>
          {(projects.data ?? []).map((p) => {
            const role = roleOf({ platformAdmin: me.platform_admin, username: me.username, orgRole, members: [p.members] });
            return (
              <tr key={p.id} data-testid={`project-${p.name}`}>
                <td>
                  <Link to={to(`/projects/${encodeURIComponent(p.name)}/apps`)}>{p.name}</Link>
                </td>
                <td>{p.cluster}</td>
                <td>{p.namespace}</td>
                <td>
                  <Phase phase={p.phase} />
                </td>
                <td>{p.fences.network?.isolation ?? "isolated"}</td>
                <td data-testid={`cpu-${p.name}`}>{usedOf(used(p.name)?.used.cpu, p.fences.quota?.cpu)}</td>
                <td>{usedOf(used(p.name)?.used.memory, p.fences.quota?.memory)}</td>
                <td>{p.members.map((m) => `${m.user} (${m.role})`).join(", ")}</td>
                <td>
                  {canAdmin(role) && (
                    <ConfirmButton
                      danger
                      label="Delete project"
                      question={`Delete the project ${p.name} and its namespace?`}
                      onConfirm={async () => {
                        try {
                          ok(await api.DELETE("/api/v1/projects/{id}", { params: { path: { id: p.id } } }));
                          projects.reload();
                        } catch (err) {
                          setError(err as Error);
                        }
                      }}
                    />
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </>
  );
}
