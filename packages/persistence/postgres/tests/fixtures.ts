import { SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import type { PostgresPersistenceError } from '@dsh/session-persistence-postgres'
import { headerOf } from '@dsh/test-kit'

// Sessions and events the PostgreSQL backend's own tests write.

/** A root session's header, or a seeded child's when `parentSession` is given. */
export function header(id: string, parentSession?: string) {
  return headerOf(id, parentSession === undefined ? {} : { parentSession, isSeeded: true, delegationDepth: 1 })
}

/** `count` user messages from `from` on, their text `${tag}${seq}`. */
export function events(from: number, count: number, tag = 'e'): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    type: 'user/message',
    seq: SessionSeq(from + i),
    time: from + i,
    data: { text: `${tag}${from + i}` },
  }))
}

/** The append target of root session `id`. */
export const target = (id: string) => ({ header: header(id), inheritedEventCount: SessionLogOffset(0) })

/** What `promise` rejects with; a test fails when it resolves. */
export const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a rejection')
    },
    (error: unknown) => error as PostgresPersistenceError,
  )
