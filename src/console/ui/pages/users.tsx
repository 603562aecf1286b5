import { Csrf, When } from "../layout";

/** Who may sign in: the configured CONSOLE_USERS, then those added here. */
export const UsersPage = (props: {
  csrf: string;
  configured: string[];
  added: { email: string; addedBy: string; createdAt: string }[];
}) => (
  <>
    <form method="post" action="/console/ui/users" class="card">
      <Csrf token={props.csrf} />
      <label for="u-email">Allow another e-mail to sign in</label>
      <input id="u-email" name="email" type="email" required />
      <button type="submit">Add user</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>E-mail</th>
            <th>Source</th>
          </tr>
        </thead>
        <tbody>
          {props.configured.map((e) => (
            <tr>
              <td>{e}</td>
              <td class="muted">CONSOLE_USERS</td>
            </tr>
          ))}
          {props.added.map((u) => (
            <tr>
              <td>{u.email}</td>
              <td class="muted">
                added by {u.addedBy} on <When iso={u.createdAt} dateOnly />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);
