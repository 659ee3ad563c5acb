import { describe, expect, it } from "vitest";
import { defaultOrg, legacyTarget, orgOf, orgPath, switchOrgPath } from "./paths";

describe("addresses", () => {
  it("puts a page under its organization", () => {
    expect(orgPath("acme", "/apps/42")).toBe("/orgs/acme/apps/42");
    expect(orgPath("acme", "apps")).toBe("/orgs/acme/apps");
    expect(orgPath("acme", "/")).toBe("/orgs/acme");
  });

  it("escapes an organization name that is not a plain segment", () => {
    expect(orgPath("a/b", "/apps")).toBe("/orgs/a%2Fb/apps");
    expect(orgOf("/orgs/a%2Fb/apps")).toBe("a/b");
  });

  it("reads the organization of an address, and none where there is none", () => {
    expect(orgOf("/orgs/acme/apps/42/logs")).toBe("acme");
    expect(orgOf("/orgs/acme")).toBe("acme");
    expect(orgOf("/apps/42")).toBeNull();
    expect(orgOf("/orgs/")).toBeNull();
    expect(orgOf("/orgs/%E0%A4%A")).toBe("%E0%A4%A");
  });

  it("redirects an address from before organizations were in it", () => {
    expect(legacyTarget("/apps/42", "?x=1", "acme")).toBe("/orgs/acme/apps/42?x=1");
    expect(legacyTarget("/", "", "acme")).toBe("/orgs/acme");
    expect(legacyTarget("/orgs", "", "acme")).toBe("/orgs/acme");
    expect(legacyTarget("/orgs/", "", "acme")).toBe("/orgs/acme");
  });

  it("keeps the section but not the object when switching organization", () => {
    expect(switchOrgPath("/orgs/acme/apps/42/logs", "other")).toBe("/orgs/other/apps");
    expect(switchOrgPath("/orgs/acme/audit", "other")).toBe("/orgs/other/audit");
    expect(switchOrgPath("/orgs/acme/clusters/7", "other")).toBe("/orgs/other");
    expect(switchOrgPath("/orgs/acme", "other")).toBe("/orgs/other");
    expect(switchOrgPath("/orgs/acme/nonsense", "other")).toBe("/orgs/other");
  });

  it("shows the last organization of the tab only while the user is a member", () => {
    const orgs = [{ name: "acme" }, { name: "beta" }];
    expect(defaultOrg(orgs, "beta")).toBe("beta");
    expect(defaultOrg(orgs, "gone")).toBe("acme");
    expect(defaultOrg(orgs, null)).toBe("acme");
    expect(defaultOrg([], "beta")).toBe("");
  });
});
