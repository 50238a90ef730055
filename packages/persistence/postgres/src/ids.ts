import { createHash } from 'node:crypto'
import type { SessionId } from '@dsh/session'
import { checkId, idFault, persistenceError } from '@dsh/session-persistence/backend'

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
 * An id is any string the wire can name (`checkId`): quotes, backslashes and
 * any Unicode scalar value. Any other is `SESSION_PERSISTENCE_INVALID_ID`,
 * among them a lone surrogate, which has no UTF-8 form (two ids would
 * collide in one key).
 */
export function storedId(id: SessionId): StoredId {
  if (typeof id !== 'string') {
    throw persistenceError('SESSION_PERSISTENCE_INVALID_ID', `A session id must be a string, got ${typeof id}.`)
  }
  checkId(id)
  const bytes = Buffer.from(id, 'utf8')
  return { id, bytes, key: keyOf(bytes), lock: createHash('sha256').update('lock:').update(bytes).digest().readBigInt64BE(0).toString() }
}

/** Whether an id can be stored at all (reads of one that cannot simply find nothing). */
export function isStorableId(id: unknown): id is SessionId {
  return typeof id === 'string' && idFault(id) === undefined
}

/** The SHA-256 key of a string (ids, parent ids, cwds), as the indexes store it. */
export function keyOf(value: string | Buffer): Buffer {
  return createHash('sha256')
    .update(typeof value === 'string' ? Buffer.from(value, 'utf8') : value)
    .digest()
}
