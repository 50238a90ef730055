import { Context, type Logger } from '@dsh/context'
import { type Session, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { type SessionProjectionUnit, sessionProjectionsPlugin, z } from '@dsh/session-projection'
import type { CheckpointThrottle } from '@dsh/session-projection-cache'
import type pg from 'pg'
import { type PostgresProjectionCache, postgresProjectionCachePlugin } from '../src/index.js'

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
  readonly pool: pg.Pool
  readonly throttle?: CheckpointThrottle
  readonly units?: ReadonlyArray<SessionProjectionUnit<'messages'> | SessionProjectionUnit<'turns'>>
  /** Installed before the cache plugin: stands where persistence's flush listener sits. */
  readonly onFlush?: (session: Session) => unknown
  /** Persist through the PostgreSQL backend on the same pool (the whole stack). */
  readonly persist?: boolean
  readonly idPrefix?: string
}

/** A host: store, (optionally) PostgreSQL persistence, projections, the PostgreSQL cache. */
export async function host(options: HostOptions) {
  const warnings: Array<{ message: string; error: unknown }> = []
  const logger: Logger = {
    warn: (message, error) => void warnings.push({ message, error }),
    error: (message, error) => void warnings.push({ message, error }),
  }
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let n = 0
  await ctx.activate(sessionStorePlugin({ clock: () => 1_700_000_000_000 + n, newId: () => `${options.idPrefix ?? 's'}${++n}` }))
  if (options.onFlush) ctx.on('session/flush', options.onFlush)
  if (options.persist)
    await ctx.activate(sessionPersistencePlugin(await createPostgresPersistence({ pool: options.pool }), { writeBehindMs: 0 }))
  await ctx.activate(sessionProjectionsPlugin())
  const projections = ctx.require('sessionProjections')
  for (const unit of options.units ?? [messagesUnit, turnsUnit]) projections.register(unit as SessionProjectionUnit<'messages'>)
  await ctx.activate(
    postgresProjectionCachePlugin({ pool: options.pool, throttle: options.throttle ?? { events: Infinity, ms: Infinity } }),
  )
  return {
    ctx,
    sessions: ctx.require('sessions'),
    projections,
    cache: ctx.require('sessionProjectionCache') as PostgresProjectionCache,
    warnings,
  }
}

export function turn(session: Session, no: number, text: string): void {
  session.append('turn/start', { turn: no })
  session.append('user/message', { text })
  session.append('assistant/message', { turn: no, text: `re: ${text}` })
  session.append('turn/end', { turn: no, reason: 'completed' })
}
