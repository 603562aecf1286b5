import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../../../auth/app-env";
import { addConsoleUser, listAddedConsoleUsers } from "../../../auth/console-users";
import { placementOf } from "../../../ledger/place";
import { nowIso } from "../../../lib/time";
import { normalizeEmail } from "../../sign-in";
import { field, form } from "../forms";
import { UsersPage } from "../pages/users";
import { back, csrfOf, emailOf, render } from "../render";

/** Console users: who may sign in, and letting another e-mail in. */
export const userRoutes = new Hono<AppEnv>()
  .get("/console/ui/users", async (c) => {
    const added = await listAddedConsoleUsers(placementOf(c.env).control.db);
    return render(
      c,
      "Console users",
      "/console/ui/users",
      <UsersPage csrf={csrfOf(c)} configured={c.get("settings").consoleUsers} added={added} />,
    );
  })
  .post("/console/ui/users", async (c) => {
    const email = z
      .string()
      .trim()
      .email()
      .safeParse(field(await form(c), "email"));
    if (!email.success) return back(c, ["users"], "Enter a valid e-mail address.");
    await addConsoleUser(placementOf(c.env).control.db, {
      email: normalizeEmail(email.data),
      addedBy: emailOf(c),
      createdAt: nowIso(),
    });
    return back(c, ["users"], `${normalizeEmail(email.data)} may now sign in.`);
  });
