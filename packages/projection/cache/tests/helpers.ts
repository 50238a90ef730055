import type { Session } from '@dsh/session'
import { type SessionProjectionUnit, z } from '@dsh/session-projection'
import { type CheckpointThrottle, sessionProjectionCachePlugin } from '../src/index.js'
import { cacheTestHost } from '../src/testing.js'

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
