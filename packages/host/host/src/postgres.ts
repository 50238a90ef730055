import type { Context } from '@dsh/context'
import { type SessionPersistenceCoordinator, sessionPersistencePlugin } from '@dsh/session-persistence'
import type pg from 'pg'
import { HostError } from './errors.js'

/** Where a PostgreSQL host keeps its sessions: one database shared by persistence, query and cache. */
export interface PostgresHostOptions {
  /** `postgres://user@host:port/database` (credentials may come from PG* environment variables). Give this or `pool`. */
  readonly connectionString?: string
  /** A pool you own (not ended by `dispose`). */
  readonly pool?: pg.Pool
  /** Run each backend's migrations on open (default true). With `false`, an unmigrated database is refused (`dsh migrate` migrates). */
  readonly migrate?: boolean
}

/**
 * Opens the one `pg` pool a PostgreSQL host shares between persistence,
 * cache and query (or takes the caller's). Call it before any plugin is
 * activated: a pool opened here is ended by the first-registered disposer,
 * so it closes last, after every backend. `pg` loads only here.
 */
export async function openPostgresPool(ctx: Context, options: PostgresHostOptions): Promise<pg.Pool> {
  if (options.pool !== undefined) return options.pool
  const pool = await newPool(options)
  ctx.onDispose(() => pool.end())
  return pool
}

/**
 * A pool of its own over `options.connectionString`, its connects bounded and
 * kept alive (`poolConfig`): a server that never answers fails typed instead
 * of hanging the host. The caller ends it.
 */
export async function newPool(options: PostgresHostOptions): Promise<pg.Pool> {
  if (options.connectionString === undefined)
    throw new HostError('HOST_INVALID_OPTIONS', '`postgres` needs exactly one of `connectionString` and `pool`.')
  const [{ default: pgModule }, { poolConfig }] = await Promise.all([import('pg'), import('@dsh/session-persistence-postgres')])
  return new pgModule.Pool(poolConfig(options.connectionString))
}

/**
 * Service `sessionPersistence` over the pool: migrated on open unless
 * `migrate: false`; read-only (no migration, no writer lease, writes refused
 * with `SESSION_PERSISTENCE_READ_ONLY`) when `readOnly`.
 */
export async function activatePostgresPersistence(
  ctx: Context,
  pool: pg.Pool,
  options: PostgresHostOptions,
  readOnly: boolean,
  onCoordinator: (coordinator: SessionPersistenceCoordinator) => void,
): Promise<void> {
  const { createPostgresPersistence } = await import('@dsh/session-persistence-postgres')
  const persistence = await createPostgresPersistence({
    pool,
    ...migrateOption(options, readOnly),
    ...(readOnly ? { readOnly: true } : {}),
  })
  await ctx.activate(sessionPersistencePlugin(persistence, { onCoordinator }))
}

/** A read-only host never migrates: an unmigrated or newer database is refused, not changed. */
export function migrateOption(options: PostgresHostOptions, readOnly: boolean): { migrate?: boolean } {
  if (readOnly) return { migrate: false }
  return options.migrate === undefined ? {} : { migrate: options.migrate }
}

export async function activatePostgresCache(ctx: Context, pool: pg.Pool, options: PostgresHostOptions, readOnly: boolean): Promise<void> {
  const { postgresProjectionCachePlugin } = await import('@dsh/session-projection-cache-postgres')
  await ctx.activate(postgresProjectionCachePlugin({ pool, ...migrateOption(options, readOnly), ...(readOnly ? { readOnly: true } : {}) }))
}

export async function activatePostgresQuery(ctx: Context, pool: pg.Pool, options: PostgresHostOptions, readOnly: boolean): Promise<void> {
  const { postgresSessionQueryPlugin } = await import('@dsh/session-query-postgres')
  await ctx.activate(postgresSessionQueryPlugin({ pool, ...migrateOption(options, readOnly), ...(readOnly ? { readOnly: true } : {}) }))
}

/** The server a connection string names, without credentials (what `host.root` shows for a PostgreSQL host). */
export function postgresLocation(options: PostgresHostOptions): string {
  if (options.connectionString === undefined) return 'postgres (a pool given by the caller)'
  try {
    const url = new URL(options.connectionString)
    url.username = ''
    url.password = ''
    url.search = ''
    return url.toString()
  } catch {
    return 'postgres (connection string not shown)'
  }
}
