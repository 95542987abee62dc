/** `ipKey`: a client address keyed as the proxy's `ip` key part keys it, for the keys library and middleware users build themselves. */
import { DEFAULT_IPV6_PREFIX, IPV6_PREFIX_WANTED, isIpv6Prefix } from "../config/key-parts";
import { ipKey as groupedAddress } from "../routing/ip";
import { trimOws } from "../routing/key-text";

/**
 * The key for a client address, as the proxy's `ip` key part makes it: an IPv4 address as is, an
 * IPv4-mapped IPv6 address as its IPv4, any other IPv6 address as its network under `ipv6Prefix`
 * (default 56), so a client cannot mint a fresh quota from each address its ISP delegates to it
 * (an IPv6 client holds a /64 at least). Spaces and tabs around the address are not part of it (the
 * runtime keeps a header's trailing ones from the wire), as for the proxy. Undefined for anything that is not an address (absent,
 * empty, a port or zone id): the middleware counts that under its shared `#none` key. Throws a
 * RangeError for a prefix outside 32–128.
 *
 * @example
 * rateLimit({ binding: "LIMITER", rule, key: (c) => ipKey(c.req.header("cf-connecting-ip")) });
 * ipKey("2001:db8:abcd:12ff::1"); // "2001:db8:abcd:1200::/56"
 * ipKey("::ffff:203.0.113.7");    // "203.0.113.7"
 */
export function ipKey(address: string | null | undefined, ipv6Prefix: number = DEFAULT_IPV6_PREFIX): string | undefined {
  if (!isIpv6Prefix(ipv6Prefix)) throw new RangeError(`ipKey: ipv6Prefix: expected ${IPV6_PREFIX_WANTED}, got ${String(ipv6Prefix)}`);
  if (typeof address !== "string") return undefined;
  return groupedAddress(trimOws(address), ipv6Prefix) ?? undefined;
}
