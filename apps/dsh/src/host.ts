import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { Context, type Logger } from '@dsh/context'
import { sessionStorePlugin, type SessionStore } from '@dsh/session'
import { sessionPersistencePlugin, type SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin, type SessionProjections } from '@dsh/session-projection'
import { projectionCachePath, sessionProjectionCachePlugin, type SessionProjectionCache } from '@dsh/session-projection-cache'
import { sessionQueryPlugin, type IndexProgress, type SessionQuery } from '@dsh/session-query'
import { defaultIndexPath, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import { createScriptedDriver, subagentsPlugin, type SubagentDriver, type SubagentRuntime } from '@dsh/subagent'

export interface HostOptions {
  /** The session root directory (created if missing). */
  readonly root: string
  /** `jsonl` (default): the embedded zstd JSONL backend under `root`; or any backend. */
  readonly persistence?: 'jsonl' | SessionPersistence
  /** Encoding for a new jsonl root (default zstd). */
  readonly compression?: JsonlCompression
  /** `sqlite` (default): the derived index under `root/.index`; `memory`: scan persistence. */
  readonly query?: 'sqlite' | 'memory'
  /** The SQLite checkpoint cache under `root/.cache` (default true). */
  readonly projectionCache?: boolean
  /** Runs subagent turns (default: a scripted driver; no model is called). */
  readonly driver?: SubagentDriver
  readonly maxDepth?: number
  /** Progress of index rebuilds and reconciliations. */
  readonly onIndexProgress?: (progress: IndexProgress) => void
  readonly logger?: Logger
}

/** The composed services of one process over one session root. */
export interface Host {
  readonly root: string
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly persistence: SessionPersistence
  readonly projections: SessionProjections
  readonly cache: SessionProjectionCache | undefined
  readonly query: SessionQuery
  readonly subagents: SubagentRuntime
  /** Settles runs, writes final checkpoints, flushes and closes everything (reverse activation order). */
  dispose(): Promise<void>
}

/**
 * The composition root with the embedded defaults: JSONL+zstd persistence,
 * the projection registry with the SQLite checkpoint cache, the SQLite query
 * index and the subagent runtime. Activation order is the disposal order
 * reversed: subagent runs settle first, then the cache writes its final
 * checkpoints while persistence is still open, and persistence flushes last.
 */
export async function createHost(options: HostOptions): Promise<Host> {
  const root = resolve(options.root)
  mkdirSync(root, { recursive: true })
  const ctx = new Context(options.logger === undefined ? {} : { logger: options.logger })
  if (options.logger !== undefined) ctx.provide('logger', options.logger)
  try {
    const persistence = options.persistence === undefined || options.persistence === 'jsonl'
      ? createJsonlPersistence({ root, ...(options.compression === undefined ? {} : { compression: options.compression }) })
      : options.persistence
    await ctx.activate(sessionStorePlugin())
    await ctx.activate(sessionPersistencePlugin(persistence))
    await ctx.activate(sessionProjectionsPlugin())
    if (options.projectionCache !== false) await ctx.activate(sessionProjectionCachePlugin({ path: projectionCachePath(root) }))
    await ctx.activate(options.query === 'memory'
      ? sessionQueryPlugin()
      : sqliteSessionQueryPlugin({ path: defaultIndexPath(root), ...(options.onIndexProgress === undefined ? {} : { onProgress: options.onIndexProgress }) }))
    await ctx.activate(subagentsPlugin({ driver: options.driver ?? createScriptedDriver(), ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }) }))
    return {
      root,
      ctx,
      sessions: ctx.require('sessions'),
      persistence: ctx.require('sessionPersistence'),
      projections: ctx.require('sessionProjections'),
      cache: ctx.get('sessionProjectionCache'),
      query: ctx.require('sessionQuery'),
      subagents: ctx.require('subagents'),
      dispose: () => ctx.dispose(),
    }
  } catch (error) {
    await ctx.dispose()
    throw error
  }
}
