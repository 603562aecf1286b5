import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { dbOfShard } from "../../src/db/shards";
import { api, consoleToken } from "../helpers/api";
import { agentOn } from "./helpers";

// The checkpoint routes take the shard whose chain they sign or read (shard 0 without one).

const headOf = (shard: number) =>
  dbOfShard(env, shard)
    .prepare("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
    .first<{ seq: number; hash: string }>();

const payloadOf = (jws: string) =>
  JSON.parse(
    new TextDecoder().decode(
      Uint8Array.from(atob(jws.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/")), (ch) => ch.charCodeAt(0)),
    ),
  );

describe("audit checkpoints of a shard on demand", () => {
  it("signs shard 1's head with ?shard=1, names the shard in the payload, and reads it back as that shard's latest", async () => {
    const token = await consoleToken();
    await agentOn(1, { credit: 300 });
    await agentOn(0, { credit: 200 });
    const top1 = (await headOf(1))!;
    const top0 = (await headOf(0))!;

    const made = await api("POST", "/console/audit/checkpoints?shard=1", { token });
    expect(made.status).toBe(201);
    const cp = (made.body as { checkpoint: { seq: number; hash: string; jws: string } }).checkpoint;
    expect(cp).toMatchObject({ seq: top1.seq, hash: top1.hash });
    expect(payloadOf(cp.jws)).toMatchObject({ shard: 1, seq: top1.seq, hash: top1.hash });

    // The head has not moved: the same checkpoint, 200.
    const again = await api("POST", "/console/audit/checkpoints?shard=1", { token });
    expect(again.status).toBe(200);
    expect((again.body as { checkpoint: { jws: string } }).checkpoint.jws).toBe(cp.jws);

    const latest1 = await api("GET", "/audit/checkpoints/latest?shard=1", { token });
    expect(latest1.status).toBe(200);
    expect((latest1.body as { checkpoint: { jws: string } }).checkpoint.jws).toBe(cp.jws);

    // Shard 0's are its own: signed without `shard`, from its own head.
    const made0 = await api("POST", "/console/audit/checkpoints", { token });
    expect(made0.status).toBe(201);
    const cp0 = (made0.body as { checkpoint: { seq: number; hash: string; jws: string } }).checkpoint;
    expect(cp0).toMatchObject({ seq: top0.seq, hash: top0.hash });
    expect(payloadOf(cp0.jws).shard).toBeUndefined();
    const latest0 = await api("GET", "/audit/checkpoints/latest?shard=0", { token });
    expect((latest0.body as { checkpoint: { jws: string } }).checkpoint.jws).toBe(cp0.jws);
  });

  it("refuses a shard this deployment does not run, and a malformed one", async () => {
    const token = await consoleToken();
    for (const shard of ["2", "-1", "x"]) {
      expect((await api("POST", `/console/audit/checkpoints?shard=${shard}`, { token })).status).toBe(400);
      expect((await api("GET", `/audit/checkpoints/latest?shard=${shard}`, { token })).status).toBe(400);
    }
  });
});
