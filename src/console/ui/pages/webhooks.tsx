import { EVENT_TYPES } from "../../../ledger/outbox";
import type { deliveryView, endpointView, listAttempts } from "../../../webhooks/endpoints";
import { Csrf, When } from "../layout";
import type { MerchantItem } from "./merchants";

/** The endpoints and the form that adds one. */
export const WebhooksPage = (props: {
  csrf: string;
  endpoints: ReturnType<typeof endpointView>[];
  merchants: MerchantItem[];
}) => (
  <>
    <form method="post" action="/console/ui/webhooks" class="card">
      <Csrf token={props.csrf} />
      <h2>Add an endpoint</h2>
      <label for="w-url">URL</label>
      <input id="w-url" name="url" type="url" required />
      <span class="group-label">Events (none checked = all)</span>
      <div class="row">
        {EVENT_TYPES.map((e) => (
          <label>
            <input type="checkbox" name="events" value={e} /> {e}
          </label>
        ))}
      </div>
      <label for="w-merchant">Only this merchant's events (optional)</label>
      <select id="w-merchant" name="merchantId">
        <option value="">Every event of the service</option>
        {props.merchants.map((m) => (
          <option value={m.id}>
            {m.name} ({m.id})
          </option>
        ))}
      </select>
      <button type="submit">Add endpoint</button>
    </form>
    <div class="card">
      <table>
        <thead>
          <tr>
            <th>Endpoint</th>
            <th>Events</th>
            <th>Merchant</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {props.endpoints.map((e) => (
            <tr>
              <td>
                <a href={`/console/ui/webhooks/${e.id}`}>{e.url}</a>
                <br />
                <code>{e.id}</code>
              </td>
              <td>{e.events.length ? e.events.join(", ") : "all"}</td>
              <td>{e.merchantId ?? "all"}</td>
              <td>
                <When iso={e.createdAt} dateOnly />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </>
);

/** One endpoint's deliveries; a delivered or failed one can be sent again. */
export const DeliveriesPage = (props: {
  csrf: string;
  endpointId: string;
  deliveries: ReturnType<typeof deliveryView>[];
}) => (
  <div class="card">
    {props.deliveries.length === 0 ? <p class="muted">No deliveries yet.</p> : null}
    <table>
      <thead>
        <tr>
          <th>Event</th>
          <th>Status</th>
          <th class="num">Attempts</th>
          <th>Last</th>
          <th>Next attempt</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        {props.deliveries.map((d) => (
          <tr class="delivery">
            <td>
              {d.type}
              <br />
              <code>{d.eventId}</code>
            </td>
            <td>
              <span class={`badge ${d.status === "delivered" ? "ok" : d.status === "failed" ? "bad" : "warn"}`}>
                {d.status}
              </span>
            </td>
            <td class="num">
              <a href={`/console/ui/webhooks/${props.endpointId}/deliveries/${d.id}`}>{d.attempts}</a>
            </td>
            <td>
              {d.lastStatusCode ?? ""} {d.lastError ?? ""}
            </td>
            <td>{d.nextAttemptAt ?? "—"}</td>
            <td>
              {d.status !== "pending" ? (
                <form
                  method="post"
                  action={`/console/ui/webhooks/${props.endpointId}/deliveries/${d.id}/redeliver`}
                  class="inline"
                >
                  <Csrf token={props.csrf} />
                  <button type="submit" class="secondary">
                    Redeliver
                  </button>
                </form>
              ) : null}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);

/** Every attempt of one delivery. */
export const AttemptsPage = (props: { attempts: Awaited<ReturnType<typeof listAttempts>> }) => (
  <div class="card">
    <table>
      <thead>
        <tr>
          <th>#</th>
          <th>When</th>
          <th>Status code</th>
          <th>Error</th>
          <th class="num">ms</th>
        </tr>
      </thead>
      <tbody>
        {props.attempts.map((a) => (
          <tr>
            <td>{a.attempt}</td>
            <td>
              <When iso={a.createdAt} />
            </td>
            <td>{a.statusCode ?? "—"}</td>
            <td>{a.error ?? ""}</td>
            <td class="num">{a.durationMs}</td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
);
