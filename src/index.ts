import { DurableObject } from "cloudflare:workers";
export class RateLimiter extends DurableObject {}
export default { fetch() { return new Response("hi"); } };
