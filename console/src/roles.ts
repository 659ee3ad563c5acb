// What the signed-in user may do, from the same facts the server decides on: platform admin,
// the role at organization scope (`OrgResponse.role`), and memberships of clusters and
// projects. The console only hides actions; the server enforces every rule.
import type { Member, Role } from "./api/client";

const RANK: Record<Role, number> = { viewer: 1, member: 2, admin: 3 };

export type Facts = {
  platformAdmin: boolean;
  username: string;
  orgRole?: Role | null;
  members?: Member[][];
};

/// The strongest role that applies, or null when none does.
export function roleOf(facts: Facts): Role | null {
  if (facts.platformAdmin) return "admin";
  let best: Role | null = facts.orgRole ?? null;
  for (const list of facts.members ?? []) {
    for (const m of list) {
      if (m.user === facts.username && (!best || RANK[m.role] > RANK[best])) best = m.role;
    }
  }
  return best;
}

/// Creates and changes (members and admins).
export const canWrite = (role: Role | null) => role === "member" || role === "admin";
/// Destructive operations, token rotation, members (admins).
export const canAdmin = (role: Role | null) => role === "admin";
