// Who is signed in and which organization the pages show (from `GET /api/v1/me` and
// `GET /api/v1/orgs`).
import { createContext, useContext } from "react";
import type { Org, Role, Schemas } from "./api/client";

export type Account = {
  me: Schemas["UserView"];
  orgs: Org[];
  org: string;
  setOrg(org: string): void;
};

export const AccountContext = createContext<Account | null>(null);

export function useAccount(): Account {
  const account = useContext(AccountContext);
  if (!account) throw new Error("useAccount outside the signed-in layout");
  return account;
}

/// The signed-in user's role at organization scope in the shown organization.
export function useOrgRole(): Role | null {
  const { me, orgs, org } = useAccount();
  if (me.platform_admin) return "admin";
  return orgs.find((o) => o.name === org)?.role ?? null;
}
