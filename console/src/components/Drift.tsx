// Drift, for an App and a standalone addon alike: the fields another manager changed on the
// cluster as the agent last reported them, and one line per drift event of the stream.
import type { Schemas } from "../api/client";
import type { LiveEvent } from "../live/store";
import { Head } from "./ui";

type Sync = Schemas["SyncView"];

export function Drift({ sync }: { sync: Sync }) {
  if (!sync.drift_detected) return <p data-testid="drift">In sync with the cluster.</p>;
  return (
    <section data-testid="drift" aria-label="Drift">
      <h2>Drift{sync.drift_class ? ` (${sync.drift_class})` : ""}</h2>
      <table>
        <Head columns={["Resource", "Field", "Desired", "Observed", "Changed by"]} />
        <tbody>
          {sync.drift_details.map((d) => (
            <tr key={`${d.resource}/${d.field}`}>
              <td>{d.resource}</td>
              <td>
                <code>{d.field}</code>
              </td>
              <td>{d.desired}</td>
              <td>{d.observed}</td>
              <td>{d.manager ?? "unknown"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/// One `app.drift` or `addon.drift` event in words: the fields, values and who changed them,
/// or that the drift healed.
export function describeDrift(e: LiveEvent): string {
  if (!e.drift_detected) return "drift healed";
  const details = (e.drift_details as Sync["drift_details"] | undefined) ?? [];
  const fields = details.map((d) => `${d.resource} ${d.field} desired ${d.desired} observed ${d.observed} by ${d.manager ?? "unknown"}`);
  return `drift detected${fields.length ? `: ${fields.join("; ")}` : ""}`;
}
