// The size bound a session holds its events to, at the `./limits` subpath (a
// module that imports nothing) for packages that depend on the session and not
// on the protocol, and for `@dsh/protocol`'s tests, which check it against the
// protocol's own declaration.

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
