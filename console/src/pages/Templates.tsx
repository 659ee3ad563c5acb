// Stack templates: made from a running App or imported from exported JSON, and deployed by
// filling their slots.
import { useState, type FormEvent, type ReactNode } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, ok, ApiFailure, type App, type Schemas } from "../api/client";
import { useAccount, useOrgPath, useOrgRole } from "../account";
import { useLoad } from "../load";
import { canWrite } from "../roles";
import { ErrorNote, Head, Missing } from "../components/ui";

export function Templates() {
  const to = useOrgPath();
  const { org } = useAccount();
  const writer = canWrite(useOrgRole());
  const list = useLoad(async () => ok(await api.GET("/api/v1/templates", { params: { query: { org } } })), [org]);
  return (
    <>
      <h1>Stack templates</h1>
      {writer && <NewTemplate org={org} onCreated={list.reload} />}
      <ErrorNote error={list.error} />
      <table>
        <Head columns={["Template", "Scope", "Description", "Slots", "Valid"]} />
        <tbody>
          {(list.data ?? []).map((t) => (
            <tr key={t.id} data-testid={`template-row-${t.name}`}>
              <td>
                <Link to={to(`/templates/${t.id}`)}>{t.name}</Link>
              </td>
              <td>{t.scope}</td>
              <td>{t.description}</td>
              <td>{t.parameters.map((p) => p.name).join(", ")}</td>
              <td>{t.valid ? "yes" : `no: ${t.message}`}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.length === 0 && <p>No templates.</p>}
    </>
  );
}

/// The two ways to a new template, each a form: from a running App, or exported JSON imported
/// into a project. Both make project templates (cluster and global ones are for the API).
function NewTemplate({ org, onCreated }: { org: string; onCreated: () => void }) {
  const projects = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })), [org]);
  const apps = useLoad(async () => ok(await api.GET("/api/v1/apps", { params: { query: { org, limit: 500 } } })).items, [org]);
  const [failure, setFailure] = useState<{ form: string; error: Error }>();
  const field = failure?.error instanceof ApiFailure ? (failure.error.field ?? "") : "";
  const submit = (form: string, send: (data: FormData) => Promise<unknown>) => async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const element = e.currentTarget;
    setFailure(undefined);
    try {
      await send(new FormData(element));
      element.reset();
      onCreated();
    } catch (err) {
      setFailure({ form, error: err as Error });
    }
  };
  const fromApp = submit("from-app", async (data) => {
    const app = (apps.data ?? []).find((a) => a.id === data.get("app_id"));
    ok(
      await api.POST("/api/v1/templates/from-app", {
        body: { app_id: String(data.get("app_id")), name: String(data.get("name")), scope: "project", project_id: app?.project_id },
      }),
    );
  });
  const importing = submit("import", async (data) => {
    let template: unknown;
    try {
      template = JSON.parse(String(data.get("template")));
    } catch (err) {
      throw new ApiFailure(422, "invalid", `not JSON: ${(err as Error).message}`, "template");
    }
    // The API takes the description from the placement, not from the exported spec.
    const spec = (template as { spec?: { description?: unknown } } | null)?.spec;
    const description = typeof spec?.description === "string" ? spec.description : undefined;
    ok(
      await api.POST("/api/v1/templates/import", {
        // The API checks the pasted JSON and names the field at fault.
        body: { name: String(data.get("name")), scope: "project", project_id: String(data.get("project_id")), description, template: template as Schemas["ImportBody"]["template"] },
      }),
    );
  });
  const invalid = (form: string, name: string) => (failure?.form === form && (field === name || field.startsWith(`${name}.`))) || undefined;
  const error = (form: string) => failure?.form === form && <ErrorNote error={failure.error} />;
  return (
    <>
      <ErrorNote error={projects.error ?? apps.error} />
      {(apps.data ?? []).length > 0 && (
        <Section title="From a running App">
          <form onSubmit={fromApp} className="row" aria-label="New template from an App">
            <label>
              Template name <input name="name" required aria-invalid={invalid("from-app", "name")} />
            </label>
            <label>
              App{" "}
              <select name="app_id">
                {(apps.data ?? []).map((a) => (
                  <option key={a.id} value={a.id}>
                    {a.name} ({a.project})
                  </option>
                ))}
              </select>
            </label>
            <button type="submit" className="primary">
              Save as template
            </button>
            {error("from-app")}
          </form>
        </Section>
      )}
      {(projects.data ?? []).length > 0 && (
        <Section title="Import">
          <form onSubmit={importing} aria-label="Import a template" className="yaml">
            <div className="row">
              <label>
                Template name <input name="name" required aria-invalid={invalid("import", "name")} />
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
            </div>
            <label className="yaml">
              Exported template (JSON)
              <textarea name="template" rows={8} required aria-invalid={invalid("import", "template")} />
            </label>
            <div className="row">
              <button type="submit" className="primary">
                Import
              </button>
            </div>
            {error("import")}
          </form>
        </Section>
      )}
    </>
  );
}

function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section aria-label={title}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}

export function TemplateDeploy() {
  const to = useOrgPath();
  const { id = "" } = useParams();
  const { org } = useAccount();
  const role = useOrgRole();
  const navigate = useNavigate();
  const template = useLoad(async () => ok(await api.GET("/api/v1/templates/{id}", { params: { path: { id } } })), [id]);
  const projects = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })), [org]);
  const [failure, setFailure] = useState<Error>();
  const t = template.data;
  if (!t) return <Missing title="Template" error={template.error} />;
  // The API refuses a project outside the template's scope; only those inside are offered.
  const fitting = (projects.data ?? []).filter(
    (p) => t.scope === "global" || (t.scope === "project" ? p.name === t.project : p.cluster === t.cluster),
  );
  const field = failure instanceof ApiFailure ? (failure.field ?? "").replace(/^\./, "") : "";
  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget);
    const parameters: Record<string, unknown> = {};
    for (const p of t.parameters) {
      const raw = data.get(`parameters.${p.name}`);
      if (p.type === "boolean") parameters[p.name] = raw === "on";
      else if (raw !== null && raw !== "") parameters[p.name] = p.type === "integer" ? Number(raw) : String(raw);
    }
    setFailure(undefined);
    try {
      const app = ok(
        await api.POST("/api/v1/templates/{id}/deploy", {
          params: { path: { id } },
          body: { name: String(data.get("name")), project_id: String(data.get("project_id")), parameters },
        }),
      ) as unknown as App;
      navigate(to(`/apps/${app.id}`));
    } catch (err) {
      setFailure(err as Error);
    }
  };
  return (
    <>
      <h1>Template {t.name}</h1>
      <p>{t.description}</p>
      <h2>Components</h2>
      <pre>{JSON.stringify(t.components, null, 2)}</pre>
      {canWrite(role) && (
        <form onSubmit={submit} aria-label="Deploy">
          <h2>Deploy</h2>
          <label>
            App name <input name="name" required aria-invalid={field === "name" || undefined} />
          </label>
          <label>
            Project{" "}
            <select name="project_id" aria-invalid={field === "project_id" || undefined}>
              {fitting.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          {t.parameters.map((p) => (
            <label key={p.name}>
              {p.name}
              {p.required ? " (required)" : ""} {p.description && <small>{p.description}</small>}{" "}
              <input
                name={`parameters.${p.name}`}
                type={p.type === "boolean" ? "checkbox" : p.type === "integer" ? "number" : "text"}
                defaultValue={p.type === "boolean" ? undefined : (p.default ?? "")}
                defaultChecked={p.type === "boolean" ? p.default === "true" : undefined}
                required={p.required && p.type !== "boolean"}
                aria-invalid={field === `parameters.${p.name}` || undefined}
              />
            </label>
          ))}
          <ErrorNote error={failure && (field ? new Error(`${field}: ${failure.message}`) : failure)} />
          <button type="submit" className="primary">
            Deploy
          </button>
        </form>
      )}
    </>
  );
}
