// The bounds a session holds its events and ids to, at the `./limits` subpath
// (a module that imports nothing) for packages that depend on the session and
// not on the protocol, and for `@dsh/protocol`'s tests, which check them
// against the protocol's own declarations.

/**
 * Largest event `Session.append` takes: the UTF-8 bytes of its encoded line
 * (the JSON of `{type, seq, time, data}`); a larger one is refused with
 * `SESSION_EVENT_TOO_LARGE` and nothing is appended. It is the
 * `EVENT_MAX_BYTES` of `@dsh/protocol/limits`, which every persistence backend
 * enforces: an event a session took and no store would take would hold back
 * every later event of the session. The session comes before the protocol in
 * the dependency order, so it cannot import that declaration;
 * `@dsh/protocol`'s `tests/limits-agreement.spec.ts` keeps the two equal.
 */
export const EVENT_MAX_BYTES = 16 * 1024 * 1024

/**
 * Longest session id, in UTF-16 code units: the `ID_MAX_LENGTH` of
 * `@dsh/protocol/limits`.
 */
export const ID_MAX_LENGTH = 1024

/**
 * Why `id` cannot name a session, as the end of a sentence about it
 * (undefined: it can). It is the `idFault` of `@dsh/protocol/limits`, by which
 * every route and every persistence backend refuses an id: a session created
 * under an id no store would take would keep its events in memory only, so
 * creating one is refused at once (`SESSION_INVALID_HEADER`). The protocol's
 * `tests/limits-agreement.spec.ts` keeps the two rules equal.
 */
export function idFault(id: string): string | undefined {
  if (id.length === 0) return 'is empty'
  if (id.length > ID_MAX_LENGTH) return `is longer than ${ID_MAX_LENGTH} characters`
  if (id === '.' || id === '..') return 'is a dot segment, which HTTP clients rewrite; such an id cannot be addressed by path'
  if (id.includes('\u0000')) return 'contains a NUL character'
  // In a `u` regular expression a surrogate pair is one code point: `\p{Cs}` matches only a lone half.
  if (/\p{Cs}/u.test(id)) return 'contains a lone surrogate, which has no UTF-8 form'
  return undefined
}
