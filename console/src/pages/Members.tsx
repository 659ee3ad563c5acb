// The organization's members and their roles; admins add, change and remove them.
import { useState, type FormEvent } from "react";
import { api, ok, type Role } from "../api/client";
import { useAccount, useOrgRole } from "../account";
import { useLoad } from "../load";
import { canAdmin } from "../roles";
import { ConfirmButton } from "../components/Confirm";
import { ErrorNote, Head } from "../components/ui";

const ROLES: Role[] = ["viewer", "member", "admin"];

export function Members() {
  const { org } = useAccount();
  const admin = canAdmin(useOrgRole());
  const members = useLoad(async () => ok(await api.GET("/api/v1/orgs/{org}/members", { params: { path: { org } } })), [org]);
  const [failure, setFailure] = useState<Error>();
  const put = async (user: string, role: Role) => {
    setFailure(undefined);
    try {
      ok(await api.PUT("/api/v1/orgs/{org}/members", { params: { path: { org } }, body: { user, role } }));
      members.reload();
      return true;
    } catch (e) {
      setFailure(e as Error);
      return false;
    }
  };
  const add = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const data = new FormData(form);
    if (await put(String(data.get("user")), data.get("role") as Role)) form.reset();
  };
  return (
    <>
      <h1>Members of {org}</h1>
      <ErrorNote error={failure ?? members.error} />
      <table>
        <Head columns={admin ? ["User", "Role", "Actions"] : ["User", "Role"]} />
        <tbody>
          {(members.data ?? []).map((m) => (
            <tr key={m.user} data-testid={`member-${m.user}`}>
              <td>{m.user}</td>
              <td>
                {admin ? (
                  <select aria-label={`Role of ${m.user}`} value={m.role} onChange={(e) => put(m.user, e.target.value as Role)}>
                    {ROLES.map((r) => (
                      <option key={r}>{r}</option>
                    ))}
                  </select>
                ) : (
                  m.role
                )}
              </td>
              {admin && (
                <td>
                  <ConfirmButton
                    danger
                    label="Remove"
                    question={`Remove ${m.user} from ${org}?`}
                    onConfirm={async () => {
                      try {
                        ok(await api.DELETE("/api/v1/orgs/{org}/members/{user}", { params: { path: { org, user: m.user } } }));
                        members.reload();
                      } catch (e) {
                        setFailure(e as Error);
                      }
                    }}
                  />
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {admin && (
        <form onSubmit={add} className="row" aria-label="Add a member">
          <label>
            User <input name="user" required />
          </label>
          <label>
            Role{" "}
            <select name="role" defaultValue="viewer">
              {ROLES.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </select>
          </label>
          <button type="submit" className="primary">
            Add member
          </button>
        </form>
      )}
    </>
  );
}
