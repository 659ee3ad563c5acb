// The signed-in frame: navigation, the organization picker, the live stream's state, and the
// one stream subscription every page reads through the store.
import { useEffect, useState, useSyncExternalStore } from "react";
import { NavLink, Outlet, useLocation, useNavigate } from "react-router";
import { api, ok } from "../api/client";
import { session } from "../api/session";
import { AccountContext, type Account } from "../account";
import { connect } from "../live/connection";
import { store, useStore } from "../live/store";

const CONNECTION_TEXT = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  offline: "offline",
};

export function Layout() {
  const navigate = useNavigate();
  const location = useLocation();
  const signedIn = useSyncExternalStore(session.subscribe, () => session.current() !== null);
  const [account, setAccount] = useState<Omit<Account, "setOrg">>();
  const [failure, setFailure] = useState<Error>();
  const connection = useStore((s) => s.connection);

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
    Promise.all([api.GET("/api/v1/me").then(ok), api.GET("/api/v1/orgs").then(ok)]).then(([me, orgs]) => {
      if (!live) return;
      const saved = sessionStorage.getItem("kubenest.org");
      const org = orgs.find((o) => o.name === saved)?.name ?? orgs[0]?.name ?? "";
      setAccount({ me, orgs, org });
    }, (e: Error) => live && setFailure(e));
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

  if (failure) return <main id="main"><p role="alert" className="error">{failure.message}</p></main>;
  if (!signedIn || !account) return <main id="main"><p className="loading">Loading…</p></main>;
  const value: Account = {
    ...account,
    setOrg: (org) => {
      sessionStorage.setItem("kubenest.org", org);
      setAccount({ ...account, org });
    },
  };
  const logout = async () => {
    await session.logout();
    store.dispatch({ type: "reset" });
    navigate("/login");
  };
  return (
    <AccountContext.Provider value={value}>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header>
        <strong>kubenest</strong>
        <nav aria-label="Main">
          <NavLink to="/" end>Fleet</NavLink>
          <NavLink to="/projects">Projects</NavLink>
          <NavLink to="/apps">Apps</NavLink>
          <NavLink to="/addons">Addons</NavLink>
          <NavLink to="/templates">Templates</NavLink>
          <NavLink to="/members">Members</NavLink>
          <NavLink to="/alerts">Alerts</NavLink>
        </nav>
        <label>
          Organization{" "}
          <select value={value.org} onChange={(e) => value.setOrg(e.target.value)}>
            {account.orgs.map((o) => (
              <option key={o.name} value={o.name}>
                {o.display_name || o.name}
              </option>
            ))}
          </select>
        </label>
        <span className={`connection ${connection}`} role="status" data-testid="connection">
          {CONNECTION_TEXT[connection]}
        </span>
        <span>{account.me.username}</span>
        <button type="button" onClick={logout}>
          Log out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {account.orgs.length === 0 ? <p>You are not a member of any organization yet.</p> : <Outlet />}
      </main>
    </AccountContext.Provider>
  );
}
