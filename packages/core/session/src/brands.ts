import { SessionError } from './errors.js'

declare const brand: unique symbol
type Brand<T, B extends string> = T & { readonly [brand]: B }

/** A session's identity: any non-empty string (persistence encodes it path-safely). */
export type SessionId = Brand<string, 'SessionId'>
/** The position of an existing event in a session's log. */
export type SessionSeq = Brand<number, 'SessionSeq'>
/** A prefix length, gap or read offset; may equal the event count. */
export type SessionLogOffset = Brand<number, 'SessionLogOffset'>
/** A position or -1 ("before the first event"). */
export type SessionSeqCursor = SessionSeq | -1

function isIndex(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)
}

function describe(value: unknown): string {
  if (Object.is(value, -0)) return '-0'
  return typeof value === 'number' ? String(value) : `${typeof value} ${JSON.stringify(value) ?? String(value)}`
}

export function SessionId(value: unknown): SessionId {
  if (typeof value !== 'string' || value.length === 0) {
    throw new SessionError('SESSION_INVALID_ID', `A session id must be a non-empty string, got ${describe(value)}.`)
  }
  return value as SessionId
}

export function SessionSeq(value: unknown): SessionSeq {
  if (!isIndex(value)) {
    throw new SessionError('SESSION_INVALID_SEQ', `A session seq must be a non-negative safe integer (not -0), got ${describe(value)}.`)
  }
  return value as SessionSeq
}

export function SessionLogOffset(value: unknown): SessionLogOffset {
  if (!isIndex(value)) {
    throw new SessionError(
      'SESSION_INVALID_OFFSET',
      `A session log offset must be a non-negative safe integer (not -0), got ${describe(value)}.`,
    )
  }
  return value as SessionLogOffset
}

export function SessionSeqCursor(value: unknown): SessionSeqCursor {
  if (value === -1) return -1
  if (!isIndex(value)) {
    throw new SessionError('SESSION_INVALID_SEQ', `A seq cursor must be -1 or a non-negative safe integer, got ${describe(value)}.`)
  }
  return value as SessionSeq
}
