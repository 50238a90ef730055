import { Context, type Logger } from '@dsh/context'
import { type SessionStore, sessionStorePlugin } from '@dsh/session'
import type { SessionPersistence, SessionPersistenceCoordinator } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import type { IndexProgress, SessionQuery } from '@dsh/session-query'
import { defaultIndexPath, type StatementBudget, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import type pg from 'pg'
import { disposeHost } from './dispose.js'
import { HostError } from './errors.js'
import type { PostgresHostOptions } from './postgres.js'
import { prepareRoot, rootErrorOf } from './root.js'

/**
 * What a query host is given: where the sessions are and how to read them.
 * `createHost` takes these and more (projections, subagents, HTTP).
 */
export interface QueryHostOptions {
  /** The session root directory: created (0700) if missing, unless `readOnly`. Required unless `postgres`. */
  readonly root?: string
  /**
   * Open an existing root for reading only: the JSONL backend is opened
   * read-only (the root and its marker must exist, else `HOST_ROOT_INVALID`),
   * the query index is only read (what changed since it was written is
   * taken from the logs; without a usable index, listings read the logs and
   * searches fail with `SESSION_QUERY_INDEX_UNAVAILABLE`), and the checkpoint
   * cache is used only when it exists. A custom `persistence` is used as given.
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
  /** Progress of index rebuilds and reconciliations. */
  readonly onIndexProgress?: (progress: IndexProgress) => void
  readonly logger?: Logger
  /**
   * The PostgreSQL backends instead of a root: persistence, projection cache
   * and query over one pool (one database that several hosts share). Excludes
   * `root`, `persistence`, `compression`; `readOnly` (no migration, no writer
   * lease, writes refused), `query: 'memory'` and `projectionCache: false`
   * still apply.
   */
  readonly postgres?: PostgresHostOptions
}

/**
 * The services every host has: the session store, persistence and the query
 * layer over one root (or one PostgreSQL database). What `dsh sessions`,
 * `show` and `search` need, and the base of every `Host`.
 */
export interface QueryHost {
  /** The session root directory; for a PostgreSQL host, the server and database (no credentials). */
  readonly root: string
  readonly readOnly: boolean
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly persistence: SessionPersistence
  readonly query: SessionQuery
  /** Which query backend answers. */
  readonly queryBackend: 'sqlite' | 'postgres' | 'memory'
  /**
   * Flushes and closes everything (reverse activation order). Rejects with
   * `HOST_EVENTS_NOT_STORED` when the store did not take every event before
   * the persistence closed.
   */
  dispose(): Promise<void>
}

/** Where the optional services of a full host go: between persistence and query, in the order `createHost` has always used. */
export interface CompositionStage {
  readonly ctx: Context
  readonly readOnly: boolean
  /** The session root directory; `undefined` for a PostgreSQL host. */
  readonly root: string | undefined
  /** Set for a PostgreSQL host. */
  readonly pool: pg.Pool | undefined
}

/**
 * The one place a host's base is composed: root checked, context made, then
 * `sessions`, `sessionPersistence`, `beforeQuery` (a full host's projections
 * and cache) and `sessionQuery`. The caller activates the rest on the
 * returned context and disposes it if that fails; a failure here disposes
 * what was activated before rethrowing. Only the backends the options name
 * are loaded: the PostgreSQL composition and the in-memory query backend by
 * dynamic import, so a listing over a root's index loads neither.
 */
export async function composeBase(
  options: QueryHostOptions & { readonly http?: unknown },
  beforeQuery?: (stage: CompositionStage) => Promise<void>,
): Promise<Omit<QueryHost, 'sessions' | 'persistence' | 'query'>> {
  validate(options)
  const readOnly = options.readOnly === true
  const postgres = options.postgres
  const pgHost = postgres === undefined ? undefined : await import('./postgres.js')
  const root =
    postgres === undefined || pgHost === undefined
      ? prepareRoot(options.root!, readOnly || options.requireExisting === true)
      : pgHost.postgresLocation(postgres)
  const ctx = new Context(options.logger === undefined ? {} : { logger: options.logger })
  let coordinator: SessionPersistenceCoordinator | undefined
  const keep = (started: SessionPersistenceCoordinator): void => {
    coordinator = started
  }
  try {
    if (options.logger !== undefined) ctx.provide('logger', options.logger)
    // One pool for persistence, cache and query (one database), closed last.
    const pool = postgres === undefined || pgHost === undefined ? undefined : await pgHost.openPostgresPool(ctx, postgres)
    await ctx.activate(sessionStorePlugin())
    let queryBackend: QueryHost['queryBackend']
    if (postgres !== undefined && pgHost !== undefined && pool !== undefined) {
      await pgHost.activatePostgresPersistence(ctx, pool, postgres, readOnly, keep)
      await beforeQuery?.({ ctx, readOnly, root: undefined, pool })
      if (options.query === 'memory') await ctx.activate(await memoryQueryPlugin())
      else await pgHost.activatePostgresQuery(ctx, pool, postgres, readOnly)
      queryBackend = options.query === 'memory' ? 'memory' : 'postgres'
    } else {
      const jsonl = options.persistence === undefined || options.persistence === 'jsonl'
      // A read-only open reads only the root's marker: it proves the root exists without creating one.
      if (jsonl && options.requireExisting === true && !readOnly) await openPersistence(root, options, true).close()
      const persistence = openPersistence(root, options, readOnly)
      queryBackend = options.query === 'memory' ? 'memory' : 'sqlite'
      await ctx.activate(sessionPersistencePlugin(persistence, { onCoordinator: keep }))
      await beforeQuery?.({ ctx, readOnly, root, pool })
      await ctx.activate(
        queryBackend === 'memory'
          ? await memoryQueryPlugin()
          : sqliteSessionQueryPlugin({
              path: defaultIndexPath(root),
              // A read-only host only reads the index: a missing, locked or unreadable one makes listings
              // read the logs and searches answer SESSION_QUERY_INDEX_UNAVAILABLE; nothing is created or removed.
              ...(readOnly ? { readOnly: true } : {}),
              worker: options.queryWorker ?? options.http !== undefined,
              ...(options.queryBudget === undefined ? {} : { budget: options.queryBudget }),
              ...(options.onIndexProgress === undefined ? {} : { onProgress: options.onIndexProgress }),
            }),
      )
    }
    return { root, readOnly, ctx, queryBackend, dispose: () => disposeHost(ctx, () => coordinator) }
  } catch (error) {
    await ctx.dispose()
    throw error
  }
}

/** The in-memory query backend (no index): loaded only by a host that uses it. */
async function memoryQueryPlugin() {
  const { sessionQueryPlugin } = await import('@dsh/session-query')
  return sessionQueryPlugin()
}

function openPersistence(root: string, options: QueryHostOptions, readOnly: boolean): SessionPersistence {
  if (options.persistence !== undefined && options.persistence !== 'jsonl') return options.persistence
  try {
    return createJsonlPersistence({
      root,
      ...(readOnly ? { readOnly: true } : {}),
      ...(options.compression === undefined ? {} : { compression: options.compression }),
    })
  } catch (error) {
    throw rootErrorOf(error, root, 'this host opens an existing root only and creates none. Point at an existing root.')
  }
}

function validate(options: QueryHostOptions): void {
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

/**
 * A host of the store, persistence and query only: what read commands need
 * (`dsh sessions`, `show`, `search`). It loads no projection registry,
 * checkpoint cache, subagent runtime, zod or HTTP layer, so a listing costs
 * about what opening the index costs. Same options, same errors and the same
 * answers as `createHost` for what it has; dispose it when done.
 */
export async function createQueryHost(options: QueryHostOptions): Promise<QueryHost> {
  const base = await composeBase(options)
  const { ctx } = base
  return {
    ...base,
    sessions: ctx.require('sessions'),
    persistence: ctx.require('sessionPersistence'),
    query: ctx.require('sessionQuery'),
  }
}
