// The console's addresses: every page of an organization lives under `/orgs/{org}`, so a
// shared link opens in the organization it was copied from. Addresses from before (`/apps/…`)
// still work: they are redirected into the organization last shown in this tab.

/// The sections an organization's navigation lists; switching organization keeps the section.
const SECTIONS = ["clusters", "projects", "apps", "addons", "templates", "members", "alerts", "audit"];

/// The address of `path` (`/apps/42`, or `/` for the fleet) in organization `org`.
export function orgPath(org: string, path: string): string {
  const base = `/orgs/${encodeURIComponent(org)}`;
  return path === "/" || path === "" ? base : `${base}${path.startsWith("/") ? path : `/${path}`}`;
}

/// The organization an address names, or null when it names none.
export function orgOf(pathname: string): string | null {
  const match = /^\/orgs\/([^/]+)/.exec(pathname);
  if (!match) return null;
  try {
    return decodeURIComponent(match[1]!);
  } catch {
    // A malformed escape names no organization anyone can be a member of.
    return match[1]!;
  }
}

/// Where an address without an organization goes: the same page in `org`.
export function legacyTarget(pathname: string, search: string, org: string): string {
  // `/orgs` alone (or with a trailing slash) is the organization's front page.
  const rest = /^\/orgs\/?$/.test(pathname) ? "/" : pathname;
  return orgPath(org, rest) + search;
}

/// Where the organization switcher goes: the same section in `org` (an object of one
/// organization is not in another, so its page is not kept).
export function switchOrgPath(pathname: string, org: string): string {
  const section = /^\/orgs\/[^/]+\/([^/]+)/.exec(pathname)?.[1];
  if (!section || !SECTIONS.includes(section) || section === "clusters") return orgPath(org, "/");
  return orgPath(org, `/${section}`);
}

/// The organization to show when the address names none: the last one shown in this tab if
/// the user is still a member, else the first.
export function defaultOrg(orgs: { name: string }[], saved: string | null): string {
  return orgs.find((o) => o.name === saved)?.name ?? orgs[0]?.name ?? "";
}
