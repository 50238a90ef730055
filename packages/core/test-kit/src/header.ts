import { parseSessionHeader, SESSION_HEADER_VERSION, type SessionHeader } from '@dsh/session'

/** The `createdAt` of a header that does not set one (2023-11-14T22:13:20Z). */
export const HEADER_CREATED_AT = 1_700_000_000_000

/**
 * Header fields a test may set: ids as plain strings, and `undefined` meaning
 * "absent" (so a generator can pass optional fields straight through).
 */
export type HeaderFields = {
  readonly [K in Exclude<keyof SessionHeader, 'version' | 'id'>]?:
    | (NonNullable<SessionHeader[K]> extends string ? string : NonNullable<SessionHeader[K]>)
    | undefined
}

/**
 * A valid, frozen `SessionHeader` of session `id`: a top-level, unseeded
 * session created at `HEADER_CREATED_AT`, with `extra` laid over it. The
 * result goes through `parseSessionHeader`, so a field combination the model
 * rejects (say `origin` without `parentSession`) throws
 * `SESSION_INVALID_HEADER` here rather than reaching the code under test.
 */
export function headerOf(id: string, extra: HeaderFields = {}): SessionHeader {
  return parseSessionHeader({
    version: SESSION_HEADER_VERSION,
    id,
    createdAt: HEADER_CREATED_AT,
    isSeeded: false,
    delegationDepth: 0,
    ...extra,
  })
}
