import { CURSOR_MAX_LENGTH } from '@dsh/protocol/limits'
import { invalidCursor } from './failures.js'
import type { RecordKey } from './order.js'

const BASE64URL = /^[A-Za-z0-9_-]+$/
const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/** Encodes a JSON object as an opaque, URL-safe cursor. */
export function encodeCursor(payload: Readonly<Record<string, unknown>>): string {
  return Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')
}

/**
 * Decodes a cursor produced by `encodeCursor`, strictly: canonical base64url,
 * valid UTF-8, a JSON object with exactly `keys`. Anything else is
 * `SESSION_QUERY_INVALID_CURSOR`; the caller checks the field values.
 */
export function decodeCursor(cursor: unknown, keys: readonly string[]): Record<string, unknown> {
  if (typeof cursor !== 'string') throw invalidCursor(`a cursor is a string, got ${cursor === null ? 'null' : typeof cursor}`)
  if (cursor.length === 0 || cursor.length > CURSOR_MAX_LENGTH || !BASE64URL.test(cursor))
    throw invalidCursor('it is not a base64url token')
  const bytes = Buffer.from(cursor, 'base64url')
  // Non-canonical encodings (stray trailing bits) are forgeries, not cursors we issued.
  if (bytes.toString('base64url') !== cursor) throw invalidCursor('it is not a canonical base64url token')
  let payload: unknown
  try {
    payload = JSON.parse(strictUtf8.decode(bytes))
  } catch {
    throw invalidCursor('it does not decode to a cursor')
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload))
    throw invalidCursor('it does not decode to a cursor object')
  const record = payload as Record<string, unknown>
  const actual = Object.keys(record).sort()
  const expected = [...keys].sort()
  if (actual.length !== expected.length || actual.some((key, i) => key !== expected[i])) throw invalidCursor('it has unexpected fields')
  return record
}

/** A short stable digest binding a cursor to the request it continues. */
export function requestDigest(parts: readonly unknown[]): string {
  return process.getBuiltinModule('node:crypto').createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 22)
}

/**
 * `requestDigest(parts)`, computed on the first call and kept: a request that
 * never reads or writes a cursor never hashes (node:crypto costs a new
 * process some 2.5 ms to load).
 */
export function lazyDigest(parts: readonly unknown[]): () => string {
  let digest: string | undefined
  return () => (digest ??= requestDigest(parts))
}

/** Encodes the keyset position after `key` for the listing request with digest `digest`. */
export function encodeListCursor(digest: string, key: RecordKey): string {
  return encodeCursor({ v: 1, kind: 'list', f: digest, c: key.createdAt, i: key.id })
}

/** Decodes a listing cursor and checks that it belongs to the request with digest `digest`. */
export function decodeListCursor(cursor: unknown, digest: string): RecordKey {
  const payload = decodeCursor(cursor, ['v', 'kind', 'f', 'c', 'i'])
  if (payload.v !== 1 || payload.kind !== 'list') throw invalidCursor('it is not a session listing cursor')
  if (payload.f !== digest) throw invalidCursor('it was issued for a different filter')
  const { c, i } = payload
  if (typeof c !== 'number' || !Number.isSafeInteger(c) || c < 0 || Object.is(c, -0) || typeof i !== 'string' || i.length === 0)
    throw invalidCursor('its position is malformed')
  return { createdAt: c, id: i }
}
