/**
 * A sum of doubles kept exactly, so a running total that peers join and leave in any order rounds
 * once, to the same double as summing the same values afresh: a float total would drift from it.
 */

/** Every finite double is a whole number of 2^-1074; the non-finite ones are counted apart, as IEEE addition treats them. */
export interface ExactSum {
  units: bigint;
  nan: number;
  plusInfinity: number;
  minusInfinity: number;
}

const bits = new DataView(new ArrayBuffer(8));
const FRACTION = (1n << 52n) - 1n;
const HIDDEN = 1n << 52n;
/** Number() of a larger bigint could overflow: the excess is shifted off first. */
const ROOM = 1n << 1000n;
const SHIFT = 512n;

export function emptySum(): ExactSum {
  return { units: 0n, nan: 0, plusInfinity: 0, minusInfinity: 0 };
}

/** `sum` with `x` added (`sign` 1) or taken away (`sign` -1): a new value, `sum` is unchanged. */
export function addExact(sum: ExactSum, x: number, sign: 1 | -1): ExactSum {
  if (Number.isNaN(x)) return { ...sum, nan: sum.nan + sign };
  if (x === Number.POSITIVE_INFINITY) return { ...sum, plusInfinity: sum.plusInfinity + sign };
  if (x === Number.NEGATIVE_INFINITY) return { ...sum, minusInfinity: sum.minusInfinity + sign };
  bits.setFloat64(0, x);
  const raw = bits.getBigUint64(0);
  const exponent = (raw >> 52n) & 0x7ffn;
  const magnitude = exponent === 0n ? raw & FRACTION : ((raw & FRACTION) | HIDDEN) << (exponent - 1n);
  const signed = raw >> 63n ? -magnitude : magnitude;
  return { ...sum, units: sign === 1 ? sum.units + signed : sum.units - signed };
}

/** The sum rounded to the nearest double (ties to even), as one correctly rounded addition of all its terms would give. */
export function roundSum(sum: ExactSum): number {
  if (sum.nan > 0 || (sum.plusInfinity > 0 && sum.minusInfinity > 0)) return Number.NaN;
  if (sum.plusInfinity > 0) return Number.POSITIVE_INFINITY;
  if (sum.minusInfinity > 0) return Number.NEGATIVE_INFINITY;
  let m = sum.units < 0n ? -sum.units : sum.units;
  let scale = -1074;
  // A sticky low bit keeps what was shifted off, so Number() still rounds ties the right way.
  while (m >= ROOM) {
    const kept = m >> SHIFT;
    m = kept << SHIFT === m ? kept : kept | 1n;
    scale += Number(SHIFT);
  }
  // Number() rounds once; scaling by a power of two is exact unless the result is subnormal, and then m < 2^53 is exact already.
  const magnitude = Number(m) * 2 ** scale;
  return sum.units < 0n ? -magnitude : magnitude;
}
