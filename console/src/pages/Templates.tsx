// Stack templates, and deploying one by filling its slots.
import { useState, type FormEvent } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, ok, ApiFailure, type App } from "../api/client";
import { useAccount, useOrgRole } from "../account";
import { useLoad } from "../load";
import { canWrite } from "../roles";
import { ErrorNote, Missing } from "../components/ui";

export function Templates() {
  const { org } = useAccount();
  const list = useLoad(async () => ok(await api.GET("/api/v1/templates", { params: { query: { org } } })), [org]);
  return (
    <>
      <h1>Stack templates</h1>
      <ErrorNote error={list.error} />
      <table>
        <thead>
          <tr>
            <th scope="col">Template</th>
            <th scope="col">Scope</th>
            <th scope="col">Description</th>
            <th scope="col">Slots</th>
            <th scope="col">Valid</th>
          </tr>
        </thead>
        <tbody>
          {(list.data ?? []).map((t) => (
            <tr key={t.id}>
              <td>
                <Link to={`/templates/${t.id}`}>{t.name}</Link>
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

export function TemplateDeploy() {
  const { id = "" } = useParams();
  const { org } = useAccount();
  const role = useOrgRole();
  const navigate = useNavigate();
  const template = useLoad(async () => ok(await api.GET("/api/v1/templates/{id}", { params: { path: { id } } })), [id]);
  const projects = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })), [org]);
  const [failure, setFailure] = useState<Error>();
  const t = template.data;
  if (!t) return <Missing title="Template" error={template.error} />;
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
      navigate(`/apps/${app.id}`);
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
            App name <input name="name" required />
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
