import { createHash } from 'node:crypto'
import type { SessionId } from '@dsh/session'
import { checkIdLength, ID_MAX_LENGTH, persistenceError } from '@dsh/session-persistence/backend'

/** The bytes and keys of one session id as the tables store it. */
export interface StoredId {
  readonly id: SessionId
  /** UTF-8 bytes: `bytea` order is code point order. */
  readonly bytes: Buffer
  /** SHA-256 of the bytes: the unique, indexable key of an id of any length. */
  readonly key: Buffer
  /** The advisory lock key of the session's writer lease (64 bits of the same digest). */
  readonly lock: string
}

/**
 * An id is any non-empty string of Unicode scalar values up to
 * `ID_MAX_LENGTH` code units: NUL, quotes, backslashes. A longer one is
 * `SESSION_PERSISTENCE_INVALID_ID` (no id is stored that the wire cannot
 * name). A lone surrogate has no UTF-8 encoding, so it
 * could only be stored by replacing it (two ids would collide): such an id
 * is `SESSION_PERSISTENCE_INVALID_ID`.
 */
export function storedId(id: SessionId): StoredId {
  if (typeof id === 'string') checkIdLength(id)
  if (!isStorableId(id)) {
    throw persistenceError(
      'SESSION_PERSISTENCE_INVALID_ID',
      'A session id must be a non-empty string of Unicode scalar values (no lone surrogates) to be stored in PostgreSQL.',
      {
        details: { id },
      },
    )
  }
  const bytes = Buffer.from(id, 'utf8')
  return { id, bytes, key: keyOf(bytes), lock: createHash('sha256').update('lock:').update(bytes).digest().readBigInt64BE(0).toString() }
}

// With the u flag, a paired surrogate is one code point; only a lone one is category Cs.
const LONE_SURROGATE = /\p{Cs}/u

/** Whether an id can be stored at all (reads of one that cannot simply find nothing). */
export function isStorableId(id: unknown): id is SessionId {
  return typeof id === 'string' && id.length > 0 && id.length <= ID_MAX_LENGTH && !LONE_SURROGATE.test(id)
}

/** The SHA-256 key of a string (ids, parent ids, cwds), as the indexes store it. */
export function keyOf(value: string | Buffer): Buffer {
  return createHash('sha256')
    .update(typeof value === 'string' ? Buffer.from(value, 'utf8') : value)
    .digest()
}
