// Create or change an App: a form and a YAML editor over the same draft; the API's field
// errors are shown on the field they name (or on the YAML editor when the form has no such
// input).
import { useEffect, useState, type FormEvent } from "react";
import { useNavigate, useParams } from "react-router";
import { api, ok, ApiFailure, type App } from "../api/client";
import { useAccount, useOrgPath } from "../account";
import { useLoad } from "../load";
import { fromYaml, getPath, newComponent, normalizeField, setPath, toYaml, type AppDraft } from "../appForm";
import { Missing } from "../components/ui";

export function AppEdit() {
  const to = useOrgPath();
  const { id } = useParams();
  const { org } = useAccount();
  const navigate = useNavigate();
  const projects = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/projects", { params: { path: { org } } })), [org]);
  const existing = useLoad(
    async () => (id ? ok(await api.GET("/api/v1/apps/{id}", { params: { path: { id } } })) : undefined),
    [id],
  );
  const [draft, setDraft] = useState<AppDraft>();
  const [mode, setMode] = useState<"form" | "yaml">("form");
  const [yaml, setYaml] = useState("");
  const [failure, setFailure] = useState<ApiFailure | Error>();

  useEffect(() => {
    if (draft) return;
    const app: App | undefined = existing.data;
    if (id && !app) return;
    if (!id && !projects.data) return;
    setDraft(
      app
        ? { name: app.name, project_id: app.project_id ?? "", components: app.components }
        : { name: "", project_id: projects.data?.[0]?.id ?? "", components: [newComponent("workload", 1)] },
    );
  }, [existing.data, projects.data, id, draft]);

  if (!draft) return <Missing title="Edit App" error={existing.error ?? projects.error} />;
  const field = failure instanceof ApiFailure ? normalizeField(failure.field) : "";
  const inputs = new Set(["name", "project_id", ...draft.components.flatMap((_, i) => ["name", "type", "workload_spec.image", "workload_spec.replicas", "workload_spec.port", "addon_spec.definition"].map((f) => `components[${i}].${f}`))]);
  const onForm = mode === "form" && field !== "" && inputs.has(field);

  const switchTo = (next: "form" | "yaml") => {
    if (next === "yaml") setYaml(toYaml(draft));
    else {
      try {
        setDraft(fromYaml(yaml, draft.project_id));
      } catch (e) {
        setFailure(e as Error);
        return;
      }
    }
    setFailure(undefined);
    setMode(next);
  };

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setFailure(undefined);
    let body = draft;
    try {
      if (mode === "yaml") body = fromYaml(yaml, draft.project_id);
      const app = id
        ? ok(await api.PATCH("/api/v1/apps/{id}", { params: { path: { id } }, body: { components: body.components } }))
        : ok(await api.POST("/api/v1/apps", { body }));
      navigate(to(`/apps/${(app as unknown as App).id}`));
    } catch (err) {
      setFailure(err as Error);
    }
  };

  const text = (path: string, label: string, type = "text") => {
    const value = getPath(draft, path);
    const invalid = onForm && field === path;
    return (
      <label>
        {label}{" "}
        <input
          name={path}
          type={type}
          value={value === undefined || value === null ? "" : String(value)}
          aria-invalid={invalid || undefined}
          aria-describedby={invalid ? "field-error" : undefined}
          disabled={path === "name" && Boolean(id)}
          onChange={(e) => {
            const raw = e.target.value;
            setDraft(setPath(draft, path, type === "number" ? (raw === "" ? undefined : Number(raw)) : raw));
          }}
        />
        {invalid && (
          <span id="field-error" role="alert" className="error">
            {failure?.message}
          </span>
        )}
      </label>
    );
  };

  return (
    <>
      <h1>{id ? `Edit ${draft.name}` : "New App"}</h1>
      <div role="tablist" aria-label="Editor" className="row">
        <button type="button" role="tab" aria-selected={mode === "form"} onClick={() => switchTo("form")}>
          Form
        </button>
        <button type="button" role="tab" aria-selected={mode === "yaml"} onClick={() => switchTo("yaml")}>
          YAML
        </button>
      </div>
      <form onSubmit={submit} aria-label="App">
        {!id && (
          <label>
            Project{" "}
            <select name="project_id" value={draft.project_id} onChange={(e) => setDraft({ ...draft, project_id: e.target.value })}>
              {(projects.data ?? []).map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
        )}
        {mode === "form" ? (
          <>
            {text("name", "Name")}
            {draft.components.map((c, i) => (
              <fieldset key={i}>
                <legend>Component {i + 1}</legend>
                {text(`components[${i}].name`, "Name")}
                {c.type === "addon" ? (
                  text(`components[${i}].addon_spec.definition`, "Addon definition")
                ) : (
                  <>
                    {text(`components[${i}].workload_spec.image`, "Image")}
                    {text(`components[${i}].workload_spec.replicas`, "Replicas", "number")}
                    {text(`components[${i}].workload_spec.port`, "Port", "number")}
                    {(c.workload_spec?.env ?? []).length > 0 && (
                      <p>
                        Environment: {(c.workload_spec?.env ?? []).map((e) => (e.export_ref ? `${e.name} ← ${e.export_ref.component}.${e.export_ref.export}` : e.name)).join(", ")} (edit in YAML)
                      </p>
                    )}
                  </>
                )}
                <button type="button" onClick={() => setDraft({ ...draft, components: draft.components.filter((_, j) => j !== i) })}>
                  Remove component {i + 1}
                </button>
              </fieldset>
            ))}
            <p className="row">
              <button type="button" onClick={() => setDraft({ ...draft, components: [...draft.components, newComponent("workload", draft.components.length + 1)] })}>
                Add workload
              </button>
              <button type="button" onClick={() => setDraft({ ...draft, components: [...draft.components, newComponent("addon", draft.components.length + 1)] })}>
                Add addon
              </button>
            </p>
          </>
        ) : (
          <label className="yaml">
            App YAML
            <textarea name="yaml" rows={24} spellCheck={false} value={yaml} onChange={(e) => setYaml(e.target.value)} aria-describedby={failure ? "yaml-error" : undefined} />
          </label>
        )}
        {failure && !onForm && (
          <p id="yaml-error" role="alert" className="error">
            {failure instanceof ApiFailure && failure.field ? `${normalizeField(failure.field)}: ` : ""}
            {failure.message}
          </p>
        )}
        <button type="submit" className="primary">
          {id ? "Save" : "Create"}
        </button>
      </form>
    </>
  );
}
