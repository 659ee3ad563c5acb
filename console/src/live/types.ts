// The live stream's shapes, shared by the connection that reads it and the store that keeps it
// (a room of their own, so neither imports the other).

/// The state of the one live subscription, for the header's indicator.
export type ConnectionState = "connecting" | "live" | "reconnecting" | "offline";

/// An event as the stream sends it: the envelope plus the kind's payload.
export type LiveEvent = {
  id: number;
  kind: string;
  org: string;
  cluster_id?: string | null;
  project_id?: string | null;
  app_id?: string | null;
  at: string;
  [key: string]: unknown;
};
