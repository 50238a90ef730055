import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Context } from '@dsh/context'
import { MemoryPersistenceStorage, type SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { postgresProjectionCachePlugin } from '@dsh/session-projection-cache-postgres'
import { defaultIndexPath, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import { createHost, type Host, type HostOptions } from './helpers.js'

/** The storage backends the acceptance cases run on. */
export const BACKENDS = ['memory', 'jsonl', 'postgres'] as const
export type BackendName = (typeof BACKENDS)[number]

/** Checkpoint writes only at the mandatory points (turn end, going cold), so what a case sees does not depend on timing. */
const quietThrottle = { events: 100_000, ms: 600_000 }

export interface PlaceHostOptions extends HostOptions {
  /** The backend's checkpoint cache (default true): SQLite for memory and JSONL, the PostgreSQL table for PostgreSQL. */
  readonly cache?: boolean
}

/** One storage place: processes opened on it share the sessions (one at a time). */
export interface Place {
  readonly name: BackendName
  /**
   * A process over the place: the backend's persistence and checkpoint
   * cache; the query layer is the SQLite index on JSONL and the in-memory
   * backend otherwise (or whatever `query` asks for).
   */
  open(options?: PlaceHostOptions): Promise<Host>
  close(): Promise<void>
}

export async function openPlace(name: BackendName): Promise<Place> {
  const hosts: Host[] = []
  const track = async (host: Promise<Host>): Promise<Host> => {
    const h = await host
    hosts.push(h)
    return h
  }
  const closeHosts = async (): Promise<void> => {
    for (const h of hosts.splice(0)) await h.dispose().catch(() => {})
  }
  if (name === 'memory') {
    const storage = new MemoryPersistenceStorage()
    const dir = mkdtempSync(join(tmpdir(), 'dsh-subagent-memory-'))
    return {
      name,
      open: ({ cache = true, extra, ...options } = {}) =>
        track(
          createHost({
            ...options,
            storage,
            extra: async (ctx) => {
              await extra?.(ctx)
              if (cache)
                await ctx.activate(sessionProjectionCachePlugin({ path: join(dir, 'projections.sqlite'), throttle: quietThrottle }))
            },
          }),
        ),
      close: async () => {
        await closeHosts()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }
  if (name === 'jsonl') {
    const root = mkdtempSync(join(tmpdir(), 'dsh-subagent-jsonl-'))
    return {
      name,
      open: ({ cache = true, extra, query, ...options } = {}) =>
        track(
          createHost({
            ...options,
            persistence: createJsonlPersistence({ root }),
            query: query ?? false,
            extra: async (ctx) => {
              if (query === undefined) await ctx.activate(sqliteSessionQueryPlugin({ path: defaultIndexPath(root) }))
              await extra?.(ctx)
              if (cache) await ctx.activate(sessionProjectionCachePlugin({ root, throttle: quietThrottle }))
            },
          }),
        ),
      close: async () => {
        await closeHosts()
        rmSync(root, { recursive: true, force: true })
      },
    }
  }
  const db = await freshDatabase()
  return {
    name,
    open: async ({ cache = true, extra, ...options } = {}) => {
      const persistence: SessionPersistence = await createPostgresPersistence({ pool: db.pool })
      return track(
        createHost({
          ...options,
          persistence,
          extra: async (ctx: Context) => {
            await extra?.(ctx)
            if (cache) await ctx.activate(postgresProjectionCachePlugin({ pool: db.pool, throttle: quietThrottle }))
          },
        }),
      )
    },
    close: async () => {
      await closeHosts()
      await db.end()
    },
  }
}
