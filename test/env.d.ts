// Types `env` from "cloudflare:test": floodgate's own Env plus the test-only failing objects.
import type { Env as FloodgateEnv } from "../src/env";
import type { FlakyLimiter, SlowLimiter } from "./fixtures/main";

declare global {
  namespace Cloudflare {
    interface Env extends FloodgateEnv {
      /** test-only objects that fail on demand (test/fixtures/main.ts) */
      FLAKY: DurableObjectNamespace<FlakyLimiter>;
      SLOW: DurableObjectNamespace<SlowLimiter>;
    }
  }
}
