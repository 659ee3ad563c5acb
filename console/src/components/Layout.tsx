// The signed-in frame: the header (organization switcher, the live stream's state, the user),
// the side navigation of the organization the address names, and the one stream subscription
// every page reads through the store. An address without an organization is redirected into
// the one last shown in this tab.
import { useEffect, useState, useSyncExternalStore } from "react";
import { Link, Navigate, NavLink, Outlet, useLocation, useNavigate } from "react-router";
import { api, ok } from "../api/client";
import { session } from "../api/session";
import { AccountContext, type Account } from "../account";
import { connect } from "../live/connection";
import { store, useStore } from "../live/store";
import { canAdmin } from "../roles";
import { defaultOrg, legacyTarget, orgOf, orgPath, switchOrgPath } from "../paths";

const CONNECTION_TEXT = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  offline: "offline",
};

/// The tab's last organization, for addresses that name none.
const SAVED = "kubenest.org";

export function Layout() {
  const navigate = useNavigate();
  const location = useLocation();
  const signedIn = useSyncExternalStore(session.subscribe, () => session.current() !== null);
  const [account, setAccount] = useState<Pick<Account, "me" | "orgs">>();
  const [failure, setFailure] = useState<Error>();
  const connection = useStore((s) => s.connection);
  const org = orgOf(location.pathname);

  // A reload keeps no token in memory: the refresh cookie gives a new one, or it is the login.
  useEffect(() => {
    if (signedIn) return;
    let live = true;
    session.refresh().then((token) => {
      if (live && !token) navigate(`/login?next=${encodeURIComponent(location.pathname + location.search)}`, { replace: true });
    });
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [signedIn]);

  useEffect(() => {
    if (!signedIn) return;
    let live = true;
    Promise.all([api.GET("/api/v1/me").then(ok), api.GET("/api/v1/orgs").then(ok)]).then(
      ([me, orgs]) => live && setAccount({ me, orgs }),
      (e: Error) => live && setFailure(e),
    );
    return () => {
      live = false;
    };
  }, [signedIn]);

  useEffect(() => {
    if (!signedIn) return;
    const abort = new AbortController();
    void connect(
      {
        event: (event) => store.dispatch({ type: "event", event }),
        state: (state) => store.dispatch({ type: "connection", state }),
      },
      abort.signal,
    );
    return () => abort.abort();
  }, [signedIn]);

  const member = Boolean(org && account?.orgs.some((o) => o.name === org));
  useEffect(() => {
    if (org && member) sessionStorage.setItem(SAVED, org);
  }, [org, member]);

  if (failure) return <main id="main"><p role="alert" className="error">{failure.message}</p></main>;
  if (!signedIn || !account) return <main id="main"><p className="loading">Loading…</p></main>;
  if (org === null && account.orgs.length > 0) {
    return <Navigate replace to={legacyTarget(location.pathname, location.search, defaultOrg(account.orgs, sessionStorage.getItem(SAVED)))} />;
  }
  const shown = org ?? "";
  const value: Account = {
    ...account,
    org: shown,
    setOrg: (next) => navigate(switchOrgPath(location.pathname, next)),
  };
  const role = account.me.platform_admin ? "admin" : (account.orgs.find((o) => o.name === shown)?.role ?? null);
  const logout = async () => {
    await session.logout();
    store.dispatch({ type: "reset" });
    navigate("/login");
  };
  const to = (path: string) => orgPath(shown, path);
  return (
    <AccountContext.Provider value={value}>
      <div className="shell">
        <a className="skip" href="#main">
          Skip to content
        </a>
        <header className="topbar">
          <Link className="brand" to={member ? to("/") : "/"}>
            kubenest
          </Link>
          {account.orgs.length > 0 && (
            <label className="org-switcher">
              Organization{" "}
              <select value={member ? shown : ""} onChange={(e) => value.setOrg(e.target.value)}>
                {!member && <option value="">choose…</option>}
                {account.orgs.map((o) => (
                  <option key={o.name} value={o.name}>
                    {o.display_name || o.name}
                  </option>
                ))}
              </select>
            </label>
          )}
          <span className="spacer" />
          <span className={`connection ${connection}`} role="status" data-testid="connection">
            {CONNECTION_TEXT[connection]}
          </span>
          <span className="user">{account.me.username}</span>
          <button type="button" onClick={logout}>
            Log out
          </button>
        </header>
        {member && (
          <nav aria-label="Main" className="sidenav">
            <NavLink to={to("/")} end>
              Fleet
            </NavLink>
            <NavLink to={to("/projects")}>Projects</NavLink>
            <NavLink to={to("/apps")}>Apps</NavLink>
            <NavLink to={to("/addons")}>Addons</NavLink>
            <NavLink to={to("/templates")}>Templates</NavLink>
            <NavLink to={to("/members")}>Members</NavLink>
            <NavLink to={to("/alerts")}>Alerts</NavLink>
            {canAdmin(role) && <NavLink to={to("/audit")}>Audit</NavLink>}
          </nav>
        )}
        <main id="main" tabIndex={-1}>
          {account.orgs.length === 0 ? (
            <p>You are not a member of any organization yet.</p>
          ) : member ? (
            <Outlet />
          ) : (
            <NotMember org={shown} orgs={account.orgs.map((o) => o.name)} />
          )}
        </main>
      </div>
    </AccountContext.Provider>
  );
}

/// An address naming an organization the user is not in (or that does not exist: the API
/// tells the two apart to no one).
function NotMember({ org, orgs }: { org: string; orgs: string[] }) {
  return (
    <>
      <h1>Organization {org}</h1>
      <p role="alert" className="error">
        You are not a member of the organization “{org}”, or it does not exist.
      </p>
      <p>Your organizations:</p>
      <ul>
        {orgs.map((o) => (
          <li key={o}>
            <Link to={orgPath(o, "/")}>{o}</Link>
          </li>
        ))}
      </ul>
    </>
  );
}
