// Who is signed in and which organization the pages show (from `GET /api/v1/me` and
// `GET /api/v1/orgs`; the organization is the one the address names).
import { createContext, useCallback, useContext } from "react";
import type { Org, Role, Schemas } from "./api/client";
import { orgPath } from "./paths";

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

/// The address of a page in the shown organization (`to("/apps/42")`).
export function useOrgPath(): (path: string) => string {
  const { org } = useAccount();
  return useCallback((path: string) => orgPath(org, path), [org]);
}
