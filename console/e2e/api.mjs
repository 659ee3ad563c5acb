// The scenario's set-up through the real API (users and a second organization), so the
// browser part starts from what an operator would have made.
const API = process.env.KUBENEST_API;

async function call(method, path, token, body) {
  const response = await fetch(`${API}${path}`, {
    method,
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export async function login(username, password) {
  return (await call("POST", "/api/v1/login", null, { username, password })).access_token;
}

export const api = {
  get: (token, path) => call("GET", path, token),
  post: (token, path, body) => call("POST", path, token, body),
  put: (token, path, body) => call("PUT", path, token, body),
  patch: (token, path, body) => call("PATCH", path, token, body),
};
