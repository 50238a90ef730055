/**
 * A deterministic pseudo-random source (mulberry32): the same `seed` yields
 * the same sequence of numbers in [0, 1) on every machine, so a generated
 * fixture or a failing randomized test can be reproduced from its seed.
 */
export function prng(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}
