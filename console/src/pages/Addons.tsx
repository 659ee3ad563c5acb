// Standalone addons: installing one from the catalog into a project, the list, and one with
// its revisions, a change of values or version, rollback, and its drift; both pages reload on
// the stream's `addon.changed` events (spec, phase or revision changed), the addon's page on
// its `addon.drift` events too, which it lists as they come.
import { useMemo, useState, type FormEvent } from "react";
import { Link, useParams } from "react-router";
import { api, ok, ApiFailure } from "../api/client";
import { useAccount, useOrgPath, useOrgRole } from "../account";
import { useLoad } from "../load";
import { useNewestEvent, useStore } from "../live/store";
import { canWrite } from "../roles";
import { ConfirmButton } from "../components/Confirm";
import { Drift, describeDrift } from "../components/Drift";
import { ErrorNote, Head, Phase, When, Missing } from "../components/ui";

export function Addons() {
  const to = useOrgPath();
  const { org } = useAccount();
  const writer = canWrite(useOrgRole());
  // Live: an addon's phase or revision changing in this organization reloads the list.
  const changed = useNewestEvent((e) => e.kind === "addon.changed" && e.org === org);
  const list = useLoad(async () => ok(await api.GET("/api/v1/addon-instances", { params: { query: { org } } })), [org, changed]);
  return (
    <>
      <h1>Addons</h1>
      {writer && <Install org={org} onInstalled={list.reload} />}
      <ErrorNote error={list.error} />
      <table>
        <Head columns={["Addon", "Definition", "Project", "Phase", "Revision"]} />
        <tbody>
          {(list.data ?? []).map((a) => (
            <tr key={a.id} data-testid={`addon-row-${a.name}`}>
              <td>
                <Link to={to(`/addons/${a.id}`)}>{a.name}</Link>
              </td>
              <td>{a.definition}</td>
              <td>{a.project}</td>
              <td>
                <Phase phase={a.phase} />
              </td>
              <td>{a.revision ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.length === 0 && <p>No standalone addons.</p>}
    </>
  );
}

/// Installs an addon of the catalog in one of the organization's projects.
function Install({ org, onInstalled }: { org: string; onInstalled: () => void }) {
  const projects = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })), [org]);
  const catalog = useLoad(async () => ok(await api.GET("/api/v1/addon-definitions")), []);
  const [failure, setFailure] = useState<Error>();
  const field = failure instanceof ApiFailure ? (failure.field ?? "") : "";
  if ((projects.data ?? []).length === 0 || (catalog.data ?? []).length === 0) return <ErrorNote error={projects.error ?? catalog.error} />;
  const install = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const data = new FormData(form);
    setFailure(undefined);
    try {
      ok(
        await api.POST("/api/v1/addon-instances", {
          body: { name: String(data.get("name")), project_id: String(data.get("project_id")), definition: String(data.get("definition")) },
        }),
      );
      form.reset();
      onInstalled();
    } catch (err) {
      setFailure(err as Error);
    }
  };
  return (
    <form onSubmit={install} className="row" aria-label="Install an addon">
      <label>
        Name <input name="name" required aria-invalid={field === "name" || undefined} />
      </label>
      <label>
        Project{" "}
        <select name="project_id">
          {(projects.data ?? []).map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Addon{" "}
        <select name="definition" aria-invalid={field === "definition" || undefined}>
          {(catalog.data ?? []).map((d) => (
            <option key={d.name} value={d.name}>
              {d.display_name || d.name} {d.chart_version}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" className="primary">
        Install
      </button>
      <ErrorNote error={failure} />
    </form>
  );
}

/// Changes an addon's values (JSON) or its chart version: a new revision.
function Change({ id, version, values, onChanged }: { id: string; version?: string | null; values: unknown; onChanged: () => void }) {
  const [failure, setFailure] = useState<Error>();
  const field = failure instanceof ApiFailure ? (failure.field ?? "") : "";
  const change = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget);
    setFailure(undefined);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(String(data.get("values")) || "{}");
    } catch {
      setFailure(new Error("the values are not JSON"));
      return;
    }
    const wanted = String(data.get("version")).trim();
    try {
      ok(await api.PATCH("/api/v1/addon-instances/{id}", { params: { path: { id } }, body: { values: parsed, version: wanted || undefined } }));
      onChanged();
    } catch (err) {
      setFailure(err as Error);
    }
  };
  return (
    <form onSubmit={change} aria-label="Change the addon">
      <label>
        Chart version <input name="version" defaultValue={version ?? ""} placeholder="the definition's" aria-invalid={field === "version" || undefined} />
      </label>
      <label>
        Values (JSON){" "}
        <textarea name="values" rows={4} defaultValue={JSON.stringify(values ?? {}, null, 2)} aria-invalid={field.startsWith("values") || undefined} />
      </label>
      <button type="submit" className="primary">
        Change
      </button>
      <ErrorNote error={failure} />
    </form>
  );
}

export function AddonDetail() {
  const { id = "" } = useParams();
  const role = useOrgRole();
  const changed = useNewestEvent((e) => (e.kind === "addon.changed" || e.kind === "addon.drift") && e.addon_id === id);
  const addon = useLoad(async () => ok(await api.GET("/api/v1/addon-instances/{id}", { params: { path: { id } } })), [id, changed]);
  const allEvents = useStore((s) => s.events);
  const drifts = useMemo(() => allEvents.filter((e) => e.kind === "addon.drift" && e.addon_id === id), [allEvents, id]);
  const [failure, setFailure] = useState<Error>();
  const a = addon.data;
  if (!a) return <Missing title="Addon" error={addon.error} />;
  return (
    <>
      <h1>
        Addon {a.name} <Phase phase={a.phase} />
      </h1>
      <p>{a.message}</p>
      <dl className="facts">
        <dt>Definition</dt>
        <dd>
          {a.definition} {a.version ?? ""}
        </dd>
        <dt>Exports Secret</dt>
        <dd>{a.export_secret ?? "not yet"}</dd>
      </dl>
      <Drift sync={a.sync} />
      {drifts.length > 0 && (
        <ol className="timeline" data-testid="addon-drift-events" aria-live="polite" aria-label="Drift of this addon" tabIndex={0}>
          {[...drifts].reverse().map((e) => (
            <li key={e.id}>
              <When at={e.at} /> {describeDrift(e)}
            </li>
          ))}
        </ol>
      )}
      {canWrite(role) && <Change key={`${a.version}/${JSON.stringify(a.values)}`} id={id} version={a.version} values={a.values} onChanged={addon.reload} />}
      <ErrorNote error={failure} />
      <h2>Revisions</h2>
      <table>
        <Head columns={["Revision", "Operation", "When", "By", "Result", "Values", "Actions"]} />
        <tbody>
          {(a.revisions ?? []).map((r) => (
            <tr key={r.revision} data-testid="revision-row">
              <td>{r.revision}</td>
              <td>{r.operation}</td>
              <td>
                <When at={r.created_at} />
              </td>
              <td>{r.actor}</td>
              <td>{r.result}</td>
              <td>
                <code>{JSON.stringify(r.values)}</code>
              </td>
              <td>
                {canWrite(role) && r.revision !== a.revision && (
                  <ConfirmButton
                    label="Roll back"
                    question={`Restore revision ${r.revision}?`}
                    onConfirm={async () => {
                      try {
                        ok(await api.POST("/api/v1/addon-instances/{id}/rollback", { params: { path: { id } }, body: { revision: r.revision } }));
                        addon.reload();
                      } catch (e) {
                        setFailure(e as Error);
                      }
                    }}
                  />
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
