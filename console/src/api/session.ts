// The session: the access token lives in memory only (never in storage a script could read
// later); the refresh token is the HttpOnly `kubenest_refresh` cookie, sent by the browser to
// `/api/v1/refresh` alone.

type Token = { access: string; username: string; expires: number };
type Answer = { access_token: string; expires_in: number; username: string };

/// Refresh this long before the access token expires.
const EARLY_MS = 60_000;

let current: Token | null = null;
let refreshing: Promise<string | null> | null = null;
const listeners = new Set<() => void>();

function set(token: Token | null) {
  current = token;
  listeners.forEach((l) => l());
}

function fromAnswer(answer: Answer): Token {
  return {
    access: answer.access_token,
    username: answer.username,
    expires: Date.now() + answer.expires_in * 1000,
  };
}

async function post(path: string, body?: unknown): Promise<Response> {
  return fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
}

export const session = {
  current: () => current,
  subscribe(listener: () => void) {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
  /// Logs in; the error message is the API's.
  async login(username: string, password: string): Promise<void> {
    const response = await post("/api/v1/login", { username, password });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body?.detail ?? "login failed");
    set(fromAnswer(body));
  },
  /// A new access token from the cookie, or null when there is no session (one request at a
  /// time: the cookie rotates, so two concurrent refreshes would race).
  refresh(): Promise<string | null> {
    refreshing ??= (async () => {
      try {
        const response = await post("/api/v1/refresh");
        if (!response.ok) {
          set(null);
          return null;
        }
        const token = fromAnswer(await response.json());
        set(token);
        return token.access;
      } catch {
        return current?.access ?? null;
      } finally {
        refreshing = null;
      }
    })();
    return refreshing;
  },
  /// The access token to send, refreshed first when it is about to expire.
  async token(): Promise<string | null> {
    if (!current) return null;
    if (current.expires - Date.now() < EARLY_MS) return this.refresh();
    return current.access;
  },
  async logout(): Promise<void> {
    const token = current?.access;
    set(null);
    await fetch("/api/v1/logout", {
      method: "POST",
      credentials: "same-origin",
      headers: token ? { Authorization: `Bearer ${token}` } : {},
    }).catch(() => undefined);
  },
};
