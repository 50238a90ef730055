import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { Session } from '@dsh/session'
import { type SessionProjectionUnit, z } from '@dsh/session-projection'
import { type CheckpointThrottle, sessionProjectionCachePlugin } from '../src/index.js'
import { appendTurn, cacheTestHost } from '../src/testing.js'

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    messages: { n: number; last: string | null }
    turns: { ended: number }
  }
  interface SessionProjectionMap {
    messages: { n: number; last: string | null }
    turns: number
  }
}

/** User messages: count and last text. Unchanged (same reference) by other events. */
export const messagesUnit: SessionProjectionUnit<'messages'> = {
  key: 'messages',
  stateVersion: 1,
  init: () => ({ n: 0, last: null }),
  apply: (state, event) => (event.type === 'user/message' ? { n: state.n + 1, last: (event.data as { text: string }).text } : state),
  view: (state) => state,
  schema: z.object({ n: z.number().int().nonnegative(), last: z.string().nullable() }),
}

export const turnsUnit: SessionProjectionUnit<'turns'> = {
  key: 'turns',
  stateVersion: 2,
  init: () => ({ ended: 0 }),
  apply: (state, event) => (event.type === 'turn/end' ? { ended: state.ended + 1 } : state),
  view: (state) => state.ended,
  schema: z.object({ ended: z.number().int().nonnegative() }),
}

export interface HostOptions {
  readonly path: string
  readonly throttle?: CheckpointThrottle
  readonly units?: ReadonlyArray<SessionProjectionUnit<'messages'> | SessionProjectionUnit<'turns'>>
  /** Installed before the cache plugin: stands where persistence's flush listener sits. */
  readonly onFlush?: (session: Session) => unknown
  readonly idPrefix?: string
  /** Open the cache as a host that only reads. */
  readonly readOnly?: boolean
}

/** The shared cache test host (`/testing`) with this package's typed units and the SQLite plugin on `path`. */
export function host(options: HostOptions) {
  const { path, units, readOnly, ...rest } = options
  return cacheTestHost({
    ...rest,
    units: (units ?? [messagesUnit, turnsUnit]) as readonly SessionProjectionUnit[],
    activate: (ctx, throttle) =>
      ctx.activate(
        sessionProjectionCachePlugin({
          path,
          ...(throttle === undefined ? {} : { throttle }),
          ...(readOnly === undefined ? {} : { readOnly }),
        }),
      ),
  })
}

export { appendTurn as turn } from '../src/testing.js'

/** A cache file `projections.sqlite` in `dir` holding the checkpoints of `count` sessions, closed (at rest: nothing else beside it). */
export async function writtenCache(dir: string, count: number): Promise<{ path: string; sessions: Session[]; values: unknown[] }> {
  const path = join(dir, 'projections.sqlite')
  const h = await host({ path, throttle: { events: Infinity, ms: Infinity } })
  const sessions = Array.from({ length: count }, (_, i) => {
    const session = h.sessions.create()
    appendTurn(session, i + 1, `turn ${i + 1}`)
    return session
  })
  await h.cache.idle()
  const values = sessions.map((s) => h.projections.snapshot(s))
  await h.ctx.dispose()
  const left = readdirSync(dir)
  if (left.length !== 1 || left[0] !== 'projections.sqlite') throw new Error(`the cache is not at rest: ${left.join(', ')}`)
  return { path, sessions, values }
}

/** Every entry under `dir`: name, size, inode and modification time. */
export function entriesOf(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .map((name) => {
      const stats = statSync(join(dir, name))
      return `${name} ${stats.size} ${stats.ino} ${stats.mtimeMs}`
    })
}
