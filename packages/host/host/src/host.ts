import { existsSync } from 'node:fs'
import type { ApiServer } from '@dsh/apiproxy'
import { Context, isDshError, type Logger } from '@dsh/context'
import { type SessionStore, sessionStorePlugin } from '@dsh/session'
import { type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import { type SessionProjections, sessionProjectionsPlugin } from '@dsh/session-projection'
import { type SessionProjectionCache, sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { type IndexProgress, type SessionQuery, sessionQueryPlugin } from '@dsh/session-query'
import { type StatementBudget, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import { createScriptedDriver, type SubagentDriver, type SubagentRuntime, type SubagentToolProvider, subagentsPlugin } from '@dsh/subagent'
import { HostError } from './errors.js'
import { activateHttpApi, type HttpApiOptions } from './http-plugin.js'
import { type DerivedPaths, derivedPaths } from './paths.js'
import {
  activatePostgresCache,
  activatePostgresPersistence,
  activatePostgresQuery,
  openPostgresPool,
  type PostgresHostOptions,
  postgresLocation,
} from './postgres.js'
import { prepareRoot } from './root.js'

export interface HostOptions {
  /** The session root directory: created (0700) if missing, unless `readOnly`. Required unless `postgres`. */
  readonly root?: string
  /**
   * Open an existing root for reading only: the JSONL backend is opened
   * read-only (the root and its marker must exist, else `HOST_ROOT_INVALID`),
   * and derived files (index, cache) are used only when they already exist
   * (without an index, `query` falls back to `memory`). Nothing is created.
   * A custom `persistence` is used as given.
   */
  readonly readOnly?: boolean
  /**
   * The root must already be a dsh root (`HOST_ROOT_INVALID` otherwise), but
   * the host may write (logs, index, cache): what a server over an existing
   * root wants. Implied by `readOnly`.
   */
  readonly requireExisting?: boolean
  /** `jsonl` (default): the embedded zstd JSONL backend under `root`; or any backend object. */
  readonly persistence?: 'jsonl' | SessionPersistence
  /** Encoding for a new jsonl root (default zstd; an existing root keeps its own). */
  readonly compression?: JsonlCompression
  /** `sqlite` (default): the derived index under the root; `memory`: answer from persistence. */
  readonly query?: 'sqlite' | 'memory'
  /**
   * Run the SQLite index's request-serving statements (listing and search
   * pages) in a worker thread, so a slow statement delays only its own
   * request and disposal never waits for one. Default: on when `http` is
   * given (a server must keep answering), off otherwise (a one-shot command
   * gains nothing from a thread). Index upkeep stays on the main thread.
   */
  readonly queryWorker?: boolean
  /** What one request-serving SQLite statement may spend (default `{ ms: 5000 }`); past it: `SESSION_QUERY_BUDGET_EXCEEDED`. */
  readonly queryBudget?: StatementBudget
  /** The SQLite checkpoint cache under the root (default true). */
  readonly projectionCache?: boolean
  /** Runs subagent turns (default: a scripted driver; no model is called). */
  readonly driver?: SubagentDriver
  /** The tools every subagent run may call, narrowed by each child's `toolFilter` (e.g. `subagentControlTools`). */
  readonly tools?: SubagentToolProvider
  readonly maxDepth?: number
  /** Progress of index rebuilds and reconciliations. */
  readonly onIndexProgress?: (progress: IndexProgress) => void
  readonly logger?: Logger
  /** Serve the HTTP API and web page (activated last, closed first). */
  readonly http?: HttpApiOptions
  /**
   * The PostgreSQL backends instead of a root: persistence, projection cache
   * and query over one pool (one database that several hosts share). Excludes
   * `root`, `persistence`, `compression`; `readOnly` (no migration, no writer
   * lease, writes refused), `query: 'memory'` and `projectionCache: false`
   * still apply.
   */
  readonly postgres?: PostgresHostOptions
}

/** The composed services of one process over one session root. */
export interface Host {
  /** The session root directory; for a PostgreSQL host, the server and database (no credentials). */
  readonly root: string
  readonly readOnly: boolean
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly persistence: SessionPersistence
  readonly projections: SessionProjections
  readonly cache: SessionProjectionCache | undefined
  readonly query: SessionQuery
  /** Which query backend answers (a read-only host without an index answers from memory). */
  readonly queryBackend: 'sqlite' | 'postgres' | 'memory'
  readonly subagents: SubagentRuntime
  /** The listening HTTP API when `http` was given. */
  readonly http: ApiServer | undefined
  /** The root's derived files (index, cache); `undefined` for a PostgreSQL host, which keeps them in the database. */
  readonly paths: DerivedPaths | undefined
  /** Settles runs, writes final checkpoints, flushes and closes everything (reverse activation order). */
  dispose(): Promise<void>
}

/**
 * The composition root with the embedded defaults: JSONL+zstd persistence,
 * the projection registry with the SQLite checkpoint cache, the SQLite query
 * index, the subagent runtime and, when asked, the HTTP API. Activation order
 * is the disposal order reversed: the HTTP API stops first, subagent runs
 * settle, the cache writes its final checkpoints while persistence is still
 * open, and persistence flushes last. A failed activation disposes what was
 * activated before rethrowing.
 */
export async function createHost(options: HostOptions): Promise<Host> {
  validate(options)
  const readOnly = options.readOnly === true
  const postgres = options.postgres
  const root =
    postgres === undefined ? prepareRoot(options.root!, readOnly || options.requireExisting === true) : postgresLocation(postgres)
  let paths: DerivedPaths | undefined
  const ctx = new Context(options.logger === undefined ? {} : { logger: options.logger })
  try {
    if (options.logger !== undefined) ctx.provide('logger', options.logger)
    // One pool for persistence, cache and query (one database), closed last.
    const pool = postgres === undefined ? undefined : await openPostgresPool(ctx, postgres)
    await ctx.activate(sessionStorePlugin())
    let queryBackend: Host['queryBackend']
    if (postgres !== undefined && pool !== undefined) {
      await activatePostgresPersistence(ctx, pool, postgres, readOnly)
      await ctx.activate(sessionProjectionsPlugin())
      if (options.projectionCache !== false) await activatePostgresCache(ctx, pool, postgres, readOnly)
      if (options.query === 'memory') await ctx.activate(sessionQueryPlugin())
      else await activatePostgresQuery(ctx, pool, postgres, readOnly)
      queryBackend = options.query === 'memory' ? 'memory' : 'postgres'
    } else {
      const jsonl = options.persistence === undefined || options.persistence === 'jsonl'
      // A read-only open reads only the root's marker: it proves the root exists without creating one.
      if (jsonl && options.requireExisting === true && !readOnly) await openPersistence(root, options, true).close()
      const persistence = openPersistence(root, options, readOnly)
      const local = derivedPaths(root)
      paths = local
      const useCache = options.projectionCache !== false && (!readOnly || existsSync(local.projectionCache))
      queryBackend = options.query === 'memory' || (readOnly && !existsSync(local.index)) ? 'memory' : 'sqlite'
      await ctx.activate(sessionPersistencePlugin(persistence))
      await ctx.activate(sessionProjectionsPlugin())
      if (useCache) await ctx.activate(sessionProjectionCachePlugin({ path: local.projectionCache }))
      await ctx.activate(
        queryBackend === 'memory'
          ? sessionQueryPlugin()
          : sqliteSessionQueryPlugin({
              path: local.index,
              worker: options.queryWorker ?? options.http !== undefined,
              ...(options.queryBudget === undefined ? {} : { budget: options.queryBudget }),
              ...(options.onIndexProgress === undefined ? {} : { onProgress: options.onIndexProgress }),
            }),
      )
    }
    await ctx.activate(
      subagentsPlugin({
        driver: options.driver ?? createScriptedDriver(),
        ...(options.maxDepth === undefined ? {} : { maxDepth: options.maxDepth }),
        ...(options.tools === undefined ? {} : { tools: options.tools }),
      }),
    )
    if (options.http !== undefined) await activateHttpApi(ctx, options.http)
    return {
      root,
      readOnly,
      ctx,
      sessions: ctx.require('sessions'),
      persistence: ctx.require('sessionPersistence'),
      projections: ctx.require('sessionProjections'),
      cache: ctx.get('sessionProjectionCache'),
      query: ctx.require('sessionQuery'),
      queryBackend,
      subagents: ctx.require('subagents'),
      http: ctx.get('httpServer'),
      paths,
      dispose: () => ctx.dispose(),
    }
  } catch (error) {
    await ctx.dispose()
    throw error
  }
}

function openPersistence(root: string, options: HostOptions, readOnly: boolean): SessionPersistence {
  if (options.persistence !== undefined && options.persistence !== 'jsonl') return options.persistence
  try {
    return createJsonlPersistence({
      root,
      ...(readOnly ? { readOnly: true } : {}),
      ...(options.compression === undefined ? {} : { compression: options.compression }),
    })
  } catch (error) {
    if (isDshError(error, 'JSONL_PERSISTENCE_NOT_A_ROOT')) {
      throw new HostError(
        'HOST_ROOT_INVALID',
        `${root} is not a dsh session root (it has no persistence marker); a read-only host never creates one. Point at an existing root.`,
        {
          cause: error,
          details: { root },
        },
      )
    }
    throw error
  }
}

function validate(options: HostOptions): void {
  if (options.postgres !== undefined) {
    const { connectionString, pool } = options.postgres
    if ((connectionString === undefined) === (pool === undefined)) {
      throw new HostError('HOST_INVALID_OPTIONS', 'createHost: `postgres` needs exactly one of `connectionString` and `pool`.')
    }
    const conflicting = (
      ['root', 'persistence', 'compression', 'requireExisting', 'onIndexProgress', 'queryWorker', 'queryBudget'] as const
    ).filter((key) => options[key] !== undefined && options[key] !== false)
    if (conflicting.length > 0) {
      throw new HostError(
        'HOST_INVALID_OPTIONS',
        `createHost: \`postgres\` keeps sessions, index and cache in the database; drop ${conflicting.map((k) => `\`${k}\``).join(', ')} (they describe a JSONL root and its SQLite index).`,
      )
    }
    return
  }
  if (typeof options.root !== 'string' || options.root.length === 0) {
    throw new HostError('HOST_INVALID_OPTIONS', 'createHost needs `root` (the directory that holds the sessions) or `postgres`.')
  }
  if (options.query !== undefined && options.query !== 'sqlite' && options.query !== 'memory') {
    throw new HostError('HOST_INVALID_OPTIONS', `createHost: \`query\` must be 'sqlite' or 'memory', got ${JSON.stringify(options.query)}.`)
  }
  if (options.persistence !== undefined && options.persistence !== 'jsonl' && typeof options.persistence !== 'object') {
    throw new HostError('HOST_INVALID_OPTIONS', "createHost: `persistence` must be 'jsonl' or a SessionPersistence backend object.")
  }
  const budget = options.queryBudget
  if (budget !== undefined && (!isPositiveInteger(budget.ms) || (budget.rows !== undefined && !isPositiveInteger(budget.rows)))) {
    throw new HostError(
      'HOST_INVALID_OPTIONS',
      `createHost: \`queryBudget\` must be { ms, rows? } with positive integers, got ${JSON.stringify(budget)}.`,
    )
  }
  if (options.readOnly === true && options.compression !== undefined) {
    throw new HostError(
      'HOST_INVALID_OPTIONS',
      'createHost: `compression` chooses the encoding of a new root; a read-only host opens an existing root as it is.',
    )
  }
}

function isPositiveInteger(value: unknown): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0
}
