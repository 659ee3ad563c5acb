// Small shared pieces: table headers, errors, badges, capacity bars, times.
import type { ReactNode } from "react";

/// A table's header row: one column header per name.
export function Head({ columns }: { columns: string[] }) {
  return (
    <thead>
      <tr>
        {columns.map((c) => (
          <th key={c} scope="col">
            {c}
          </th>
        ))}
      </tr>
    </thead>
  );
}

export function ErrorNote({ error }: { error?: Error | null }) {
  if (!error) return null;
  return (
    <p role="alert" className="error">
      {error.message}
    </p>
  );
}

export function Badge({ tone, children }: { tone: "ok" | "warn" | "bad" | "info"; children: ReactNode }) {
  return <span className={`badge ${tone}`}>{children}</span>;
}

const PHASE_TONE: Record<string, "ok" | "warn" | "bad" | "info"> = {
  Running: "ok",
  Ready: "ok",
  connected: "ok",
  ok: "ok",
  Deploying: "info",
  Pending: "info",
  pending: "info",
  Paused: "warn",
  warning: "warn",
  Deleting: "warn",
  disconnected: "bad",
  Failed: "bad",
  critical: "bad",
  unknown: "warn",
};

export function Phase({ phase }: { phase: string }) {
  return <Badge tone={PHASE_TONE[phase] ?? "info"}>{phase}</Badge>;
}

/// A capacity bar: a `<meter>` with its numbers in words beside it. Requests near the total
/// are a warning; nodes at their desired count (`full`) are what is wanted.
export function Capacity({ label, used, total, unit, full }: { label: string; used: number; total: number; unit: string; full?: boolean }) {
  const text = `${format(used)} / ${format(total)} ${unit}`;
  const max = total || 1;
  const levels = full ? { optimum: max } : { low: max * 0.7, high: max * 0.9, optimum: 0 };
  return (
    <div className="capacity">
      <span>{label}</span>
      <meter min={0} max={max} value={used} {...levels} aria-label={`${label} ${text}`} />
      <span>{text}</span>
    </div>
  );
}

function format(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

export const GIB = 1024 ** 3;

export function When({ at }: { at?: string | null }) {
  if (!at) return <span>never</span>;
  const date = new Date(at);
  return <time dateTime={at}>{date.toLocaleString()}</time>;
}

/// A page whose object is loading or could not be loaded (an object you may not see is a 404).
export function Missing({ title, error }: { title: string; error?: Error | null }) {
  return (
    <>
      <h1>{title}</h1>
      {error ? <ErrorNote error={error} /> : <p>Loading…</p>}
    </>
  );
}
