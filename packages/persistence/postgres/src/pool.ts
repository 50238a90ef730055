import type pg from 'pg'
import { PostgresPersistenceError } from './errors.js'

const ignore = () => {}

/**
 * Keeps a pool's dropped connections (server restart, terminate) from ending
 * the process; their holders learn of the loss from their next statement, and
 * the pool replaces the connection on its own.
 *
 * - An idle connection's error reaches the pool as `error`: one listener.
 * - A connection checked out has only its holder's listener, attached once
 *   `pool.connect()` has resolved. A new connection's first packet can carry
 *   both its ReadyForQuery and the server's FATAL (a busy process reads the
 *   two together); the driver then emits the FATAL while the connection is
 *   already handed out and before its holder can listen. So every new
 *   connection gets a listener of its own as the pool creates it.
 *
 * Every package that reads through a shared pool calls this once per pool.
 */
export function watchPool(pool: pg.Pool): void {
  const marked = pool as pg.Pool & { dshWatched?: boolean }
  if (marked.dshWatched) return
  marked.dshWatched = true
  pool.on('error', ignore)
  pool.on('connect', (client) => client.on('error', ignore))
}

/** How long a new connection of a pool from `poolConfig` may wait for the server's answer, unless told otherwise. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000

/** After this long idle, a connection's TCP keepalive probes start (the OS default is two hours). */
const KEEPALIVE_IDLE_MS = 30_000

/** What `poolConfig` may be told. */
export interface PoolConfigOptions {
  /**
   * How long a new connection may wait for the server to answer, in
   * milliseconds (a positive integer). Default: the connection string's
   * `connect_timeout` (seconds, libpq's parameter, which the `pg` driver
   * does not read itself), else {@link DEFAULT_CONNECT_TIMEOUT_MS}.
   */
  readonly connectTimeoutMs?: number
}

/**
 * The `pg.Pool` settings of the pools this package opens, for callers that
 * open their own pool over a connection string (spread it, then add `max`
 * and the like): a bound on each connect (`connectionTimeoutMillis`), so a
 * server that accepts TCP but never answers fails the open with
 * `POSTGRES_PERSISTENCE_UNAVAILABLE` instead of hanging it, and TCP keepalive
 * (`keepAlive`, probing after 30 s idle), so a connection whose peer
 * vanished is found out.
 *
 * ```ts
 * const pool = new pg.Pool({ ...poolConfig(url), max: 4 })
 * ```
 */
export function poolConfig(connectionString: string, options: PoolConfigOptions = {}): pg.PoolConfig {
  return {
    connectionString,
    connectionTimeoutMillis: connectTimeout(connectionString, options.connectTimeoutMs),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
  }
}

/** The connect bound in milliseconds: the option, the URL's `connect_timeout` (libpq: seconds, at least 2; 0 or less waits for ever), or the default. */
function connectTimeout(connectionString: string, option: number | undefined): number {
  if (option !== undefined) {
    if (!Number.isSafeInteger(option) || option < 1) {
      throw new PostgresPersistenceError(
        'POSTGRES_PERSISTENCE_INVALID_OPTIONS',
        `connectTimeoutMs must be a positive whole number of milliseconds, got ${String(option)}.`,
      )
    }
    return option
  }
  let seconds: string | null = null
  try {
    seconds = new URL(connectionString).searchParams.get('connect_timeout')
  } catch {
    // Not a URL (a socket path, key=value): no connect_timeout to read.
  }
  if (seconds === null || !/^\s*-?\d+\s*$/.test(seconds)) return DEFAULT_CONNECT_TIMEOUT_MS
  const value = Number(seconds)
  // pg reads 0 as "no bound", as libpq reads 0 and below.
  return value <= 0 ? 0 : Math.max(2, value) * 1000
}
