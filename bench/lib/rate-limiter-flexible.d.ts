// The memory limiter's own file, imported directly: the package's index also loads its cluster and
// database limiters, which require Node built-ins that an ESM bundle cannot `require`.
declare module "rate-limiter-flexible/lib/RateLimiterMemory.js" {
  import { RateLimiterMemory } from "rate-limiter-flexible";
  export default RateLimiterMemory;
}
