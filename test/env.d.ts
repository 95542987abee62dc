// Types `env` from "cloudflare:test" as floodgate's own Env.
import type { Env as FloodgateEnv } from "../src/env";

declare global {
  namespace Cloudflare {
    interface Env extends FloodgateEnv {}
  }
}
