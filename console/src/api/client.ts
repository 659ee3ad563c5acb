// The typed API client. Its types come from the committed OpenAPI document
// (`npm run gen`), so an API change that breaks the console breaks `npm run build`.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";
import { session } from "./session";

export type Schemas = components["schemas"];
export type App = Schemas["AppResponse"];
export type Cluster = Schemas["ClusterResponse"];
export type Project = Schemas["ProjectResponse"];
export type Deployment = Schemas["DeploymentView"];
export type Org = Schemas["OrgResponse"];
export type Member = Schemas["MemberBody"];
export type Role = Schemas["Role"];
export type Component = Schemas["ComponentBody"];
export type Instance = Schemas["InstanceResponse"];
export type Template = Schemas["TemplateResponse"];
export type Alert = Schemas["AlertResponse"];
export type Problem = Schemas["Problem"];
export type Registration = Schemas["RegistrationResponse"];
type ListQuery<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never;
/// The values the list filters take (the document's enums).
export type AppPhase = NonNullable<ListQuery<"/api/v1/apps">["phase"]>;
export type AlertState = NonNullable<ListQuery<"/api/v1/orgs/{org}/alerts">["state"]>;

/// Adds the in-memory access token and, on a 401, refreshes it once through the cookie and
/// repeats the request.
const auth: Middleware = {
  async onRequest({ request }) {
    const token = await session.token();
    if (token) request.headers.set("Authorization", `Bearer ${token}`);
    // Kept for a repeat after a refresh (a body can be read once).
    retries.set(request, request.clone());
    return request;
  },
  async onResponse({ request, response }) {
    const copy = retries.get(request);
    retries.delete(request);
    if (response.status !== 401 || !copy || !session.current()) return response;
    const token = await session.refresh();
    if (!token) return response;
    copy.headers.set("Authorization", `Bearer ${token}`);
    return fetch(copy);
  },
};
const retries = new WeakMap<Request, Request>();

export const api = createClient<paths>({
  // Same origin as the page, spelled out: a Request needs an absolute URL outside a browser.
  baseUrl: globalThis.location?.origin ?? "",
  credentials: "same-origin",
  // Looked up per call, not captured once, so the retry above and tests see the same fetch.
  fetch: (request) => globalThis.fetch(request),
});
api.use(auth);

/// The API's error for people, and the field it names (`components[0].workload_spec.image`).
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string | null,
  ) {
    super(message);
  }
}

/// The data of an answer, or an `ApiFailure` thrown with the API's own error.
export function ok<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.response.ok) return result.data as T;
  const body = result.error as Partial<Problem> | undefined;
  throw new ApiFailure(
    result.response.status,
    body?.code ?? "http_" + result.response.status,
    body?.detail ?? result.response.statusText,
    body?.field,
  );
}
