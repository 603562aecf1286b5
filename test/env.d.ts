import type { D1Migration } from "cloudflare:test";
import type { OptionalBindings, SettingsVars } from "../src/config/env";

// `env` in tests: the generated bindings (worker-types.d.ts), what the settings read, and the migrations.
declare global {
  namespace Cloudflare {
    interface Env extends OptionalBindings, SettingsVars {
      TEST_MIGRATIONS: D1Migration[];
    }
  }
}
