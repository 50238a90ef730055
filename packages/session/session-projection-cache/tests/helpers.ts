import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context, type Logger } from '@dsh/context'
import { type Session, type StoredSessionEvent, sessionStorePlugin } from '@dsh/session'
import { type SessionProjectionUnit, sessionProjectionsPlugin, z } from '@dsh/session-projection'
import { type CheckpointThrottle, sessionProjectionCachePlugin } from '../src/index.js'

declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    messages: { n: number; last: string | null }
    turns: { ended: number }
    brittle: { n: number }
  }
  interface SessionProjectionMap {
    messages: { n: number; last: string | null }
    turns: number
    brittle: number
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

/** Throws on `tool/call`. */
export const brittleUnit: SessionProjectionUnit<'brittle'> = {
  key: 'brittle',
  stateVersion: 1,
  init: () => ({ n: 0 }),
  apply: (state, event) => {
    if (event.type === 'tool/call') throw new Error('brittle: no tool calls')
    return { n: state.n + 1 }
  },
  view: (state) => state.n,
  schema: z.object({ n: z.number() }),
}

export type TestUnit = SessionProjectionUnit<'messages'> | SessionProjectionUnit<'turns'> | SessionProjectionUnit<'brittle'>

export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-cache-'))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

export interface HostOptions {
  readonly path: string
  readonly throttle?: CheckpointThrottle
  readonly units?: ReadonlyArray<TestUnit>
  /** Installed before the cache plugin: stands where persistence's flush listener sits. */
  readonly onFlush?: (session: Session) => unknown
  readonly idPrefix?: string
}

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
  await ctx.activate(sessionProjectionsPlugin())
  const projections = ctx.require('sessionProjections')
  for (const unit of options.units ?? [messagesUnit, turnsUnit]) projections.register(unit)
  await ctx.activate(
    sessionProjectionCachePlugin({ path: options.path, ...(options.throttle === undefined ? {} : { throttle: options.throttle }) }),
  )
  return { ctx, sessions: ctx.require('sessions'), projections, cache: ctx.require('sessionProjectionCache'), warnings }
}

export function turn(session: Session, no: number, text: string): void {
  session.append('turn/start', { turn: no })
  session.append('user/message', { text })
  session.append('assistant/message', { turn: no, text: `re: ${text}` })
  session.append('turn/end', { turn: no, reason: 'completed' })
}

export function copyEvents(session: Session): StoredSessionEvent[] {
  return session.events.map((e) => ({ ...e }))
}
