// bench/wrangler.toml repeats the service's development configuration (wrangler.toml's top level)
// and adds the floor object: wrangler has no includes. This check keeps the two from drifting, so
// the bench never measures a service configured unlike the one `npm run dev` runs.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_readConfig } from "wrangler";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const BENCH_CONFIG = path.join(ROOT, "bench/wrangler.toml");
const SERVICE_CONFIG = path.join(ROOT, "wrangler.toml");

/** What may differ: where the file is, the Worker's name and entry, its environments, and the floor object. */
const OWN = new Set(["configPath", "userConfigPath", "topLevelName", "definedEnvironments", "name", "main"]);
const FLOOR = "BENCH_FLOOR";

/** A config with its paths made absolute and the floor object left out. */
function comparable(file) {
  const config = unstable_readConfig({ config: file }, { hideWarnings: true });
  const from = (p) => (p ? path.resolve(path.dirname(file), p) : p);
  return {
    ...config,
    assets: config.assets && { ...config.assets, directory: from(config.assets.directory) },
    d1_databases: config.d1_databases.map((db) => ({ ...db, migrations_dir: from(db.migrations_dir) })),
    durable_objects: { bindings: config.durable_objects.bindings.filter((b) => b.name !== FLOOR) },
  };
}

/** Throws, naming the settings, when the bench's configuration is not the service's plus the floor. */
export function checkBenchConfig() {
  const service = comparable(SERVICE_CONFIG);
  const bench = comparable(BENCH_CONFIG);
  const differ = Object.keys({ ...service, ...bench }).filter(
    (key) => !OWN.has(key) && JSON.stringify(service[key]) !== JSON.stringify(bench[key]),
  );
  if (differ.length > 0)
    throw new Error(`bench/wrangler.toml differs from wrangler.toml's top level in: ${differ.join(", ")}`);
}
