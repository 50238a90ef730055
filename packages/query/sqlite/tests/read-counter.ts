import type { SessionPersistence } from '@dsh/session-persistence'

/** Log reads a query made through a persistence backend. */
export interface ReadCounts {
  /** Reads that return events: whole logs (`inspect`) and suffixes (`inspectFrom` within the log). */
  logs: number
  /** Whole-log reads alone (`inspect`, `inspectFrom` from 0). */
  whole: number
}

/**
 * The same backend, counting the log reads made through it. Backends count
 * only whole reads as `bodyReads`; an index reads a changed log from its
 * last indexed event on (`inspectFrom`), and these tests count every log it
 * reads. An `inspectFrom` past the log's end (a listing's header-and-tail
 * read, no event returned) is not a log read here.
 */
export function countReads<P extends SessionPersistence>(backend: P): { persistence: P; reads: ReadCounts } {
  const reads: ReadCounts = { logs: 0, whole: 0 }
  const persistence = new Proxy(backend, {
    get(target, property) {
      if (property === 'inspect') {
        return async (...args: Parameters<SessionPersistence['inspect']>) => {
          const observation = await target.inspect(...args)
          reads.logs++
          reads.whole++
          return observation
        }
      }
      if (property === 'inspectFrom') {
        return async (...args: Parameters<SessionPersistence['inspectFrom']>) => {
          const suffix = await target.inspectFrom(...args)
          if (suffix.events.length > 0 || suffix.from === 0) {
            reads.logs++
            if (suffix.from === 0) reads.whole++
          }
          return suffix
        }
      }
      const value = Reflect.get(target, property, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { persistence, reads }
}
