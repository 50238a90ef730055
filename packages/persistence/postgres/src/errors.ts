import { DshError } from '@dsh/context'
import { persistenceError, type SessionPersistenceError } from '@dsh/session-persistence/backend'

/**
 * Failures of opening a database, before any session is touched. Operations
 * on sessions fail with the contract's `SessionPersistenceError` instead, so
 * callers handle every backend alike.
 */
export type PostgresPersistenceErrorCode =
  /** The database holds a schema newer than this version knows; upgrade dsh, never migrate down. */
  | 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW'
  /**
   * A migration failed, or the schema version could not be created or read
   * (a missing privilege, a read-only server, a statement timeout;
   * `details.sqlState` says which), or an open without migrating found an
   * older schema. The database is left at the last version that committed.
   */
  | 'POSTGRES_PERSISTENCE_MIGRATION_FAILED'
  /**
   * The server cannot be reached, refused the connection (address,
   * credentials, database name), or ended it while opening (shutdown,
   * restart, a terminated backend; `details.sqlState` when it said so).
   */
  | 'POSTGRES_PERSISTENCE_UNAVAILABLE'
  /** The options are invalid (no pool and no connection string, bad sizes). */
  | 'POSTGRES_PERSISTENCE_INVALID_OPTIONS'
  /** The throwaway test cluster could not start (binaries missing, initdb failed). */
  | 'POSTGRES_PERSISTENCE_TEST_CLUSTER'

export class PostgresPersistenceError extends DshError<PostgresPersistenceErrorCode> {}

/** SQLSTATEs the server answers with when a statement, not the data, failed. */
const TIMEOUT_STATES = new Set(['57014', '55P03', '25P03'])

/** SQLSTATEs of a server that is going away or not taking connections: admin/crash shutdown, starting up or shutting down, idle session timeout. */
const GONE_STATES = new Set(['57P01', '57P02', '57P03', '57P05'])

/** What the driver says (without a SQLSTATE) when a connection ended, or a connect timed out. */
const LOST_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect|Connection unexpectedly)/

/**
 * Whether a failure means the server cannot be reached now: a refused or
 * failed connect (a socket error), a connection that ended, a connection
 * exception (SQLSTATE class 08) or a server shutting down or starting up.
 * Such a failure passes once the server is back.
 */
export function isUnreachable(error: unknown): boolean {
  const e = error as { code?: unknown; syscall?: unknown; message?: unknown } | null | undefined
  if (e === null || typeof e !== 'object') return false
  const code = typeof e.code === 'string' ? e.code : undefined
  if (code !== undefined && (code.startsWith('08') || GONE_STATES.has(code))) return true
  // Node socket errors (ECONNREFUSED, ECONNRESET, ENOENT of a Unix socket, …) name their syscall.
  if (code !== undefined && /^E[A-Z_]+$/.test(code) && typeof e.syscall === 'string') return true
  return typeof e.message === 'string' && LOST_MESSAGES.test(e.message)
}

/**
 * Maps a driver or server failure to the contract: a server that cannot be
 * reached (refused, lost, shutting down) is `SESSION_PERSISTENCE_UNAVAILABLE`;
 * timeouts and other failures of a statement are `SESSION_PERSISTENCE_IO`.
 * Retrying can fix either; the SQLSTATE or socket error is in `details`.
 */
export function ioError(what: string, error: unknown): SessionPersistenceError {
  if (error instanceof DshError) return error as SessionPersistenceError
  const sqlState = (error as { code?: unknown })?.code
  const state = typeof sqlState === 'string' ? sqlState : undefined
  const cause = error instanceof Error ? error.message : String(error)
  if (isUnreachable(error)) {
    return persistenceError(
      'SESSION_PERSISTENCE_UNAVAILABLE',
      `PostgreSQL: ${what}: the server cannot be reached or the connection was lost (${cause}). Nothing partial was committed; retry once the server is back.`,
      { cause: error, details: state === undefined ? {} : { sqlState: state } },
    )
  }
  const why = state !== undefined && TIMEOUT_STATES.has(state) ? 'the statement timed out or was cancelled' : 'the database failed'
  return persistenceError(
    'SESSION_PERSISTENCE_IO',
    `PostgreSQL: ${what}: ${why} (${cause}). Retrying may succeed; nothing partial was committed.`,
    {
      cause: error,
      details: state === undefined ? {} : { sqlState: state },
    },
  )
}

/** The database a pool points at, without credentials, for messages. */
export function poolLocation(pool: {
  options?: { connectionString?: unknown; host?: unknown; port?: unknown; database?: unknown }
}): string {
  const o = pool.options ?? {}
  if (typeof o.connectionString === 'string') {
    try {
      const url = new URL(o.connectionString)
      return `${url.hostname}:${url.port || 5432}${url.pathname}`
    } catch {
      return '(an unparsable connection string)'
    }
  }
  return `${typeof o.host === 'string' ? o.host : 'localhost'}:${typeof o.port === 'number' || typeof o.port === 'string' ? o.port : 5432}/${typeof o.database === 'string' ? o.database : '(default database)'}`
}

/** The SQLSTATE (or Node socket code) a driver failure carries, if any. */
export function sqlStateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}

/** Whether a failure is a statement cancelled by the server's timeouts or an operator, not a failed server. */
export function isTimeout(error: unknown): boolean {
  const state = sqlStateOf(error)
  return state !== undefined && TIMEOUT_STATES.has(state)
}

/** What the pool says when a new connection got no answer within `connectionTimeoutMillis` (a wait for a free connection says otherwise). */
const CONNECT_TIMEOUT = /^Connection terminated due to connection timeout/

/**
 * Opening failed because the server is unreachable, refused us, or went away
 * (shutdown, restart, a terminated backend) while the open ran. A connect
 * that got no answer within the pool's `connectionTimeoutMillis` says so,
 * with the bound.
 */
export function unavailable(
  pool: Parameters<typeof poolLocation>[0] & { options?: { connectionTimeoutMillis?: unknown } },
  cause: unknown,
): PostgresPersistenceError {
  const state = sqlStateOf(cause)
  const message = cause instanceof Error ? cause.message : String(cause)
  const bound = pool.options?.connectionTimeoutMillis
  const what = CONNECT_TIMEOUT.test(message)
    ? `${message}: no answer within ${typeof bound === 'number' ? `${bound} ms` : 'the connect timeout'} (something may accept connections there without answering as PostgreSQL, or the network drops them)`
    : message
  return new PostgresPersistenceError(
    'POSTGRES_PERSISTENCE_UNAVAILABLE',
    state !== undefined && GONE_STATES.has(state)
      ? `The PostgreSQL server at ${poolLocation(pool)} ended the connection while the database was being opened (${what}): it is shutting down, restarting or starting up, or an operator ended the session. Retry once the server is back.`
      : `Cannot open the PostgreSQL database at ${poolLocation(pool)}: ${what}. Check that the server runs and the connection string (host, port, user, database) is right; retry once the server is back.`,
    { cause, details: state === undefined ? {} : { sqlState: state } },
  )
}
