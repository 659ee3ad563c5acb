// Verified deployments on the console: the verdict on an App's last verified revision with its
// numbers and what kubenest did with it, and one line per `app.verification` event.
import type { Schemas } from "../api/client";
import type { LiveEvent } from "../live/store";
import { Badge, Head } from "./ui";

type Verdict = Schemas["VerdictView"];

const TONE: Record<string, "ok" | "warn" | "bad"> = { Passed: "ok", Inconclusive: "warn", Failed: "bad" };

/// A number as people read it: at most three decimals.
function number(n: number | null | undefined): string {
  return n === null || n === undefined ? "" : String(Math.round(n * 1000) / 1000);
}

export function Verification({ verdict }: { verdict?: Verdict | null }) {
  if (!verdict) return null;
  return (
    <section data-testid="verification" aria-label="Verification">
      <h2>
        Verification <Badge tone={TONE[verdict.verdict] ?? "warn"}>{verdict.verdict}</Badge>
      </h2>
      <p>
        Revision <code>{verdict.revision.slice(0, 12)}</code>, watched {verdict.window_seconds}s: {verdict.reason}
        {verdict.action ? ` — ${verdict.action}` : ""}
      </p>
      <table>
        <Head columns={["Signal", "Value", "Previous revision", "Threshold", ""]} />
        <tbody>
          {verdict.signals.map((s) => (
            <tr key={s.name}>
              <td>{s.name}</td>
              <td>{number(s.value)}</td>
              <td>{number(s.baseline)}</td>
              <td>{number(s.threshold)}</td>
              <td>{s.failed ? <Badge tone="bad">over</Badge> : ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/// One `app.verification` event in words.
export function describeVerdict(e: LiveEvent): string {
  const action = e.action ? ` — ${String(e.action)}` : "";
  return `verification ${String(e.verdict ?? "")} for revision ${String(e.revision ?? "").slice(0, 12)}: ${String(e.reason ?? "")}${action}`;
}
