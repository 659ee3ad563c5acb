// A project's fences (quota, default limits, network isolation) and what the organization's
// projects use against their quotas and its budget. Fences are the organization's admins' to
// set; anyone with a role in the organization sees the use.
import { useState, type FormEvent } from "react";
import { api, ok } from "../api/client";
import type { components } from "../api/schema";
import { ErrorNote } from "../components/ui";

type OrgUsage = components["schemas"]["OrgUsageResponse"];
type Project = components["schemas"]["ProjectResponse"];

/// `used / limit`, or `used` alone without a limit.
export function usedOf(used: string | undefined, limit: string | null | undefined): string {
  return limit ? `${used ?? "0"} / ${limit}` : (used ?? "-");
}

/// The organization's budget and its use, in one line.
export function BudgetLine({ usage }: { usage?: OrgUsage }) {
  if (!usage) return null;
  const org = usage.organization;
  return (
    <p data-testid="org-budget">
      CPU {usedOf(org.used.cpu, org.budget?.cpu)} · memory {usedOf(org.used.memory, org.budget?.memory)}
      {org.budget ? " (organization budget)" : " (no organization budget)"}
    </p>
  );
}

/// The fences of one project, set by an organization admin: all three replaced at once.
export function FencesForm({ projects, onSaved }: { projects: Project[]; onSaved: () => void }) {
  const [error, setError] = useState<Error>();
  const save = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget);
    const text = (key: string) => {
      const value = String(data.get(key) ?? "").trim();
      return value === "" ? undefined : value;
    };
    const pods = text("pods");
    const quota = { cpu: text("cpu"), memory: text("memory"), pods: pods === undefined ? undefined : Number(pods) };
    const allowFrom = (text("allow_from") ?? "").split(",").map((p) => p.trim()).filter(Boolean);
    setError(undefined);
    try {
      ok(
        await api.PUT("/api/v1/projects/{id}/fences", {
          params: { path: { id: String(data.get("project")) } },
          body: {
            quota: Object.values(quota).some((v) => v !== undefined) ? quota : undefined,
            network: { isolation: data.get("isolation") === "open" ? "open" : "isolated", allow_from: allowFrom },
          },
        }),
      );
      onSaved();
    } catch (err) {
      setError(err as Error);
    }
  };
  return (
    <form onSubmit={save} className="row" aria-label="Project fences">
      <label>
        Project{" "}
        <select name="project">
          {projects.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        CPU quota <input name="cpu" placeholder="2" size={6} />
      </label>
      <label>
        Memory quota <input name="memory" placeholder="4Gi" size={6} />
      </label>
      <label>
        Pods <input name="pods" type="number" min={0} size={4} />
      </label>
      <label>
        Network{" "}
        <select name="isolation">
          <option value="isolated">isolated</option>
          <option value="open">open</option>
        </select>
      </label>
      <label>
        Allow from <input name="allow_from" placeholder="web, api" size={12} />
      </label>
      <button type="submit">Set fences</button>
      <ErrorNote error={error} />
    </form>
  );
}
