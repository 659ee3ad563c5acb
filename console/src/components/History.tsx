// The deployment history of an App, each with its diff; rollback to any of them.
import { Fragment, useState } from "react";
import type { Deployment } from "../api/client";
import { diffRows } from "../diff";
import { ConfirmButton } from "./Confirm";
import { Head, When } from "./ui";

export function DiffTable({ diff }: { diff: unknown }) {
  const rows = diffRows(diff);
  if (rows.length === 0) return <p>No change to the spec.</p>;
  return (
    <table className="diff">
      <Head columns={["Change", "Field", "New value"]} />
      <tbody>
        {rows.map((r, i) => (
          <tr key={i} className={r.op}>
            <td>{r.op}</td>
            <td>
              <code>{r.path}</code>
              {r.from && ` (from ${r.from})`}
            </td>
            <td>
              <code>{r.value ?? ""}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function History({
  deployments,
  current,
  onRollback,
}: {
  deployments: Deployment[];
  current?: string | null;
  onRollback?: (id: string) => Promise<void>;
}) {
  const [open, setOpen] = useState<string | null>(null);
  return (
    <table data-testid="history">
      <Head columns={["When", "Operation", "Revision", "By", "Result", "Actions"]} />
      <tbody>
        {deployments.map((d) => (
          <Fragment key={d.id}>
            <tr data-testid="history-row">
              <td>
                <When at={d.created_at} />
              </td>
              <td>{d.operation}{d.id === current ? " (current)" : ""}</td>
              <td>
                <code>{d.revision.slice(0, 12)}</code>
              </td>
              <td>
                {d.actor}
                {d.reason ? <small title={d.reason}> ({d.reason})</small> : null}
              </td>
              <td>
                {d.result}
                {d.verification ? ` · verification ${d.verification.verdict}` : ""}
              </td>
              <td className="row">
                <button type="button" aria-expanded={open === d.id} onClick={() => setOpen(open === d.id ? null : d.id)}>
                  {open === d.id ? "Hide diff" : "Show diff"}
                </button>
                {onRollback && d.id !== current && d.operation !== "delete" && (
                  <ConfirmButton
                    label="Roll back"
                    question={`Restore the spec of the ${d.operation} at ${new Date(d.created_at).toLocaleString()} (revision ${d.revision.slice(0, 12)})?`}
                    onConfirm={() => onRollback(d.id)}
                  />
                )}
              </td>
            </tr>
            {open === d.id && (
              <tr>
                <td colSpan={6}>
                  <DiffTable diff={d.diff} />
                </td>
              </tr>
            )}
          </Fragment>
        ))}
      </tbody>
    </table>
  );
}
