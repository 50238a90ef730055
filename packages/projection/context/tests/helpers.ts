import { join } from 'node:path'
import { Context, type Logger } from '@dsh/context'
import { type Session, SessionStore, sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, MemoryPersistenceStorage, type SessionPersistence, type SessionRange } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { createProjectionRegistry, sessionProjectionsPlugin } from '@dsh/session-projection'
import type { ScriptedEvent } from '@dsh/session-projection/testing'
import { sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { postgresProjectionCachePlugin } from '@dsh/session-projection-cache-postgres'
import { tempDir } from '@dsh/test-kit'
import type pg from 'pg'
import { onTestFinished } from 'vitest'
import { contextView, registerSessionContextUnit, type SessionContext, sessionContextPlugin } from '../src/index.js'

/** A live store and registry with the `sessionContext` unit, no persistence. */
export function liveHost() {
  const ctx = new Context()
  let now = 1_700_000_000_000
  let n = 0
  const sessions = new SessionStore(ctx, { clock: () => now++, newId: () => `s${++n}` })
  ctx.provide('sessions', sessions)
  const projections = createProjectionRegistry(ctx)
  registerSessionContextUnit(projections)
  const contextOf = (session: Session): SessionContext => {
    const state = projections.snapshot(session, ['sessionContext']).sessionContext
    if (state === undefined) throw new Error('sessionContext is absent')
    return contextView(state)
  }
  return { sessions, projections, contextOf }
}

export function play(session: Session, script: readonly ScriptedEvent[]): void {
  for (const { type, data } of script) session.append(type, data)
}

/** The texts of a context's messages, one line each (`role: text|text`), for readable assertions. */
export function transcript(context: SessionContext): string[] {
  return context.messages.map((message) => {
    const parts = message.blocks.map((block) => {
      switch (block.type) {
        case 'text':
          return String(block.text)
        case 'reasoning':
          return `(${String(block.text)})`
        case 'tool-call':
          return `call ${String(block.id)} ${String(block.name)} ${JSON.stringify(block.input)}`
        case 'tool-result':
          return `result ${String(block.callId)}${block.isError === true ? ' error' : ''}: ${(block.content as { type: string; text?: string }[]).map((b) => b.text ?? `[${b.type}]`).join('|')}`
        default:
          return `[${block.type}]`
      }
    })
    return `${message.role}: ${parts.join(' | ')}`
  })
}

/** Every read a backend answers, with what it returned. */
export interface ReadLog {
  readonly ranges: { range: SessionRange; events: number }[]
  /** Whole-log reads (`inspect`, `inspectFrom`, `load`). */
  whole: number
}

/** The backend itself, with its reads recorded on the way through (nothing else changes). */
function recording(backend: SessionPersistence, log: ReadLog): SessionPersistence {
  return new Proxy(backend, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver)
      if (typeof value !== 'function') return value
      if (name === 'inspectRange') {
        return async (...args: Parameters<SessionPersistence['inspectRange']>) => {
          const observation = await target.inspectRange(...args)
          log.ranges.push({ range: args[1], events: observation.events.length })
          return observation
        }
      }
      if (name === 'inspect' || name === 'inspectFrom' || name === 'load') {
        return (...args: unknown[]) => {
          log.whole++
          return (value as (...a: unknown[]) => unknown).apply(target, args)
        }
      }
      return (value as (...a: unknown[]) => unknown).bind(target)
    },
  })
}

export type PlaceName = 'memory' | 'jsonl' | 'postgres'

/** What a PostgreSQL place needs: a fresh database's pool (the file owns its cluster). */
export interface PostgresPlace {
  readonly pool: pg.Pool
  end(): Promise<void>
}

/** A process over a storage place: persistence, the SQLite checkpoint cache, projections and `sessionContext`. */
export interface Process {
  readonly ctx: Context
  readonly reads: ReadLog
  readonly warnings: string[]
  dispose(): Promise<void>
}

/** One storage place; processes opened on it see the same sessions and the same checkpoint cache. */
export function place(
  name: PlaceName,
  postgres?: PostgresPlace,
): { readonly cachePath: string; open(options?: { cachePath?: string }): Promise<Process> } {
  const dir = tempDir(`dsh-context-${name}-`)
  const storage = new MemoryPersistenceStorage()
  const processes: Process[] = []
  onTestFinished(async () => {
    for (const p of processes.splice(0)) await p.dispose()
    await postgres?.end()
    dir.cleanup()
  })
  const cachePath = join(dir.dir, 'projections.sqlite')
  return {
    cachePath,
    async open(options = {}) {
      const warnings: string[] = []
      const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
      const ctx = new Context({ logger })
      ctx.provide('logger', logger)
      let now = 1_700_000_000_000
      let n = 0
      await ctx.activate(sessionStorePlugin({ clock: () => now++, newId: () => `${name}-${processes.length}-${++n}` }))
      await ctx.activate(sessionProjectionsPlugin())
      const reads: ReadLog = { ranges: [], whole: 0 }
      const backend =
        name === 'memory'
          ? createMemoryPersistence({ storage })
          : name === 'jsonl'
            ? createJsonlPersistence({ root: join(dir.dir, 'root') })
            : await createPostgresPersistence({ pool: (postgres as PostgresPlace).pool })
      await ctx.activate(sessionPersistencePlugin(recording(backend, reads), { writeBehindMs: 0, sharedReads: false }))
      // Checkpoints only at the mandatory points (turn end, going cold), so what a test sees does not depend on timing.
      const throttle = { events: 1_000_000, ms: 3_600_000 }
      await ctx.activate(
        name === 'postgres'
          ? postgresProjectionCachePlugin({ pool: (postgres as PostgresPlace).pool, throttle })
          : sessionProjectionCachePlugin({ path: options.cachePath ?? cachePath, throttle }),
      )
      await ctx.activate(sessionContextPlugin())
      let disposed = false
      const process: Process = {
        ctx,
        reads,
        warnings,
        dispose: async () => {
          if (disposed) return
          disposed = true
          await ctx.dispose()
        },
      }
      processes.push(process)
      return process
    },
  }
}
