// The organization's audit log (organization admins; anyone else sees the API's refusal):
// every mutation by every path, newest first, filtered and paged by the API. The filters are
// in the address, so a filtered view can be shared.
import { useState, type FormEvent } from "react";
import { useSearchParams } from "react-router";
import { api, ok, type Schemas } from "../api/client";
import { useAccount } from "../account";
import { useLoad } from "../load";
import { Badge, ErrorNote, Head, When } from "../components/ui";

type Entry = Schemas["AuditEntryView"];
const PAGE = 50;
const PATHS = ["rest", "kubectl", "gitops"] as const;
const OUTCOMES = ["succeeded", "refused", "failed"] as const;
const OUTCOME_TONE = { succeeded: "ok", refused: "warn", failed: "bad" } as const;

/// A value the address may carry only if it is one of `choices` (the API refuses the rest).
function oneOf<T extends string>(choices: readonly T[], value: string | null): T | undefined {
  return choices.find((c) => c === value);
}

export function Audit() {
  const { org } = useAccount();
  const [params, setParams] = useSearchParams();
  const actor = params.get("actor") ?? "";
  const kind = params.get("resource_kind") ?? "";
  const path = oneOf(PATHS, params.get("path"));
  const outcome = oneOf(OUTCOMES, params.get("outcome"));
  // The `continue` tokens of the pages before this one, and this one's.
  const [pages, setPages] = useState<string[]>([]);
  const cursor = pages[pages.length - 1];
  // The answer says which query it answers: rows of the previous filter are never shown
  // under a new one while it loads.
  const key = JSON.stringify([org, actor, kind, path, outcome, cursor]);
  const page = useLoad(async () => {
    const answer = ok(
      await api.GET("/api/v1/orgs/{org}/audit", {
        params: {
          path: { org },
          query: { actor: actor || undefined, resource_kind: kind || undefined, path, outcome, limit: PAGE, continue: cursor },
        },
      }),
    );
    return { ...answer, key };
  }, [key]);
  const current = page.data?.key === key ? page.data : undefined;
  const apply = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget);
    const next = new URLSearchParams();
    for (const key of ["actor", "resource_kind", "path", "outcome"]) {
      const value = String(data.get(key) ?? "").trim();
      if (value) next.set(key, value);
    }
    setParams(next);
    setPages([]);
  };
  const rows = current?.items ?? [];
  return (
    <>
      <h1>Audit log of {org}</h1>
      <p className="muted">Every change to this organization, by the console, the CLI, kubectl or GitOps, newest first.</p>
      {/* Keyed by the address, so going back restores the fields' values. */}
      <form key={params.toString()} className="card toolbar" aria-label="Audit filters" onSubmit={apply}>
        <label>
          Actor
          <input name="actor" defaultValue={actor} maxLength={512} placeholder="any" />
        </label>
        <label>
          Kind
          <input name="resource_kind" defaultValue={kind} maxLength={512} placeholder="any" />
        </label>
        <label>
          Via
          <select name="path" defaultValue={path ?? ""}>
            <option value="">any</option>
            {PATHS.map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Outcome
          <select name="outcome" defaultValue={outcome ?? ""}>
            <option value="">any</option>
            {OUTCOMES.map((o) => (
              <option key={o}>{o}</option>
            ))}
          </select>
        </label>
        <button type="submit" className="primary">
          Filter
        </button>
      </form>
      <ErrorNote error={page.error} />
      {!page.error && (
        <>
          <div className="table-wrap">
            <table data-testid="audit-table" aria-busy={!current}>
              <Head columns={["When", "Actor", "Via", "Action", "Resource", "Outcome", "Details"]} />
              <tbody>
                {rows.map((e) => (
                  <Row key={e.id} entry={e} />
                ))}
              </tbody>
            </table>
          </div>
          {current && rows.length === 0 && <p>No entries match.</p>}
          {!current && <p className="loading">Loading…</p>}
          <nav aria-label="Pages" className="row">
            <button type="button" disabled={pages.length === 0} onClick={() => setPages(pages.slice(0, -1))}>
              Newer
            </button>
            <span>Page {pages.length + 1}</span>
            <button type="button" disabled={!current?.continue} onClick={() => current?.continue && setPages([...pages, current.continue])}>
              Older
            </button>
          </nav>
        </>
      )}
    </>
  );
}

function Row({ entry: e }: { entry: Entry }) {
  const details = e.details && typeof e.details === "object" && Object.keys(e.details).length > 0 ? JSON.stringify(e.details, null, 2) : null;
  const tone = OUTCOME_TONE[e.outcome as keyof typeof OUTCOME_TONE] ?? "info";
  return (
    <tr data-testid="audit-row">
      <td>
        <When at={e.at} />
      </td>
      <td>{e.actor}</td>
      <td>{e.path}</td>
      <td>
        <code>{e.action}</code>
      </td>
      <td>
        {e.resource_kind} {e.resource_name}
      </td>
      <td>
        <Badge tone={tone}>
          {e.outcome} {e.status}
        </Badge>
      </td>
      <td>
        {details && (
          <details>
            <summary>show</summary>
            <pre>{details}</pre>
          </details>
        )}
      </td>
    </tr>
  );
}
