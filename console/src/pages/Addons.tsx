// Standalone addons, and one with its revisions and rollback.
import { useState } from "react";
import { Link, useParams } from "react-router";
import { api, ok } from "../api/client";
import { useAccount, useOrgRole } from "../account";
import { useLoad } from "../load";
import { canWrite } from "../roles";
import { ConfirmButton } from "../components/Confirm";
import { ErrorNote, Phase, When, Missing } from "../components/ui";

export function Addons() {
  const { org } = useAccount();
  const list = useLoad(async () => ok(await api.GET("/api/v1/addon-instances", { params: { query: { org } } })), [org]);
  return (
    <>
      <h1>Addons</h1>
      <ErrorNote error={list.error} />
      <table>
        <thead>
          <tr>
            <th scope="col">Addon</th>
            <th scope="col">Definition</th>
            <th scope="col">Project</th>
            <th scope="col">Phase</th>
            <th scope="col">Revision</th>
          </tr>
        </thead>
        <tbody>
          {(list.data ?? []).map((a) => (
            <tr key={a.id}>
              <td>
                <Link to={`/addons/${a.id}`}>{a.name}</Link>
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

export function AddonDetail() {
  const { id = "" } = useParams();
  const role = useOrgRole();
  const addon = useLoad(async () => ok(await api.GET("/api/v1/addon-instances/{id}", { params: { path: { id } } })), [id]);
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
      <ErrorNote error={failure} />
      <h2>Revisions</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Revision</th>
            <th scope="col">Operation</th>
            <th scope="col">When</th>
            <th scope="col">By</th>
            <th scope="col">Result</th>
            <th scope="col">Values</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {(a.revisions ?? []).map((r) => (
            <tr key={r.revision}>
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
