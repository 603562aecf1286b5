import type { Context } from "hono";
import type { AppEnv } from "../../auth/app-env";
import { actorOf } from "../../auth/middleware";
import { placementOf } from "../../ledger/place";
import { latestCheck } from "../../treasury/history";
import { Page } from "./layout";

/** The context of a console page request. */
export type Ui = Context<AppEnv>;

export const csrfOf = (c: Ui) => c.get("csrf") ?? "";
export const emailOf = (c: Ui) => actorOf(c.get("actor"), "console").email;
const noticeOf = (c: Ui) => c.req.query("notice") ?? null;

/**
 * Renders a page with the session's e-mail and CSRF token, and the treasury banner while the latest
 * check is short (one row read by its key).
 */
export const render = async (
  c: Ui,
  title: string,
  path: string,
  body: unknown,
  extra: { notice?: string | null; error?: string | null } = {},
) => {
  const latest = await latestCheck(placementOf(c.env).control.db);
  return c.html(
    <Page
      title={title}
      path={path}
      email={emailOf(c)}
      csrf={csrfOf(c)}
      notice={extra.notice ?? noticeOf(c)}
      error={extra.error ?? null}
      shortfall={latest?.status === "shortfall" ? latest : null}
    >
      {body as never}
    </Page>,
  );
};

/** Back to a page with a notice; every path segment is encoded, since some come from the request. */
export const back = (c: Ui, segments: string[], notice: string) =>
  c.redirect(`/console/ui/${segments.map(encodeURIComponent).join("/")}?notice=${encodeURIComponent(notice)}`, 303);
