import { Hono } from "hono";
import type { AppEnv } from "../../../auth/app-env";
import { EVM_ADDRESS, screenAddress } from "../../../kyt/screening";
import { placementOf } from "../../../ledger/place";
import { field, form } from "../forms";
import { KytForm, KytVerdict } from "../pages/kyt";
import { csrfOf, render } from "../render";

/** KYT: screening one address against the sanctions lists. */
export const kytRoutes = new Hono<AppEnv>()
  .get("/console/ui/kyt", (c) => render(c, "KYT screening", "/console/ui/kyt", <KytForm csrf={csrfOf(c)} />))
  .post("/console/ui/kyt", async (c) => {
    const address = field(await form(c), "address");
    if (!EVM_ADDRESS.test(address))
      return render(c, "KYT screening", "/console/ui/kyt", <KytForm csrf={csrfOf(c)} />, {
        error: "Enter an EVM address: 0x and 40 hex digits.",
      });
    const result = await screenAddress(placementOf(c.env).control.db, address);
    return render(
      c,
      "KYT screening",
      "/console/ui/kyt",
      <>
        <KytVerdict address={address} result={result} />
        <KytForm csrf={csrfOf(c)} />
      </>,
    );
  });
