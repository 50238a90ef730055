import { escapeTerminal, isDshError, type Logger } from '@dsh/context'
import type { SessionId } from '@dsh/session'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { newPool, type PostgresHostOptions, postgresLocation } from './postgres.js'
import { createQueryHost } from './query-host.js'
import { prepareRoot, rootErrorOf } from './root.js'

/** One log as `verifyRoot` found it. */
export interface VerifiedLog {
  /** The session id; for a log too damaged to name itself, its directory. */
  readonly id: string
  /**
   * `torn`: committed data is intact; an incomplete final batch follows (reads
   * ignore it, `load` truncates it). `corrupt`: committed data cannot be read
   * back. `error`: the log could not be read, or (`SESSION_PERSISTENCE_NOT_FOUND`)
   * the query index lists the session but its log is gone.
   */
  readonly status: 'ok' | 'torn' | 'corrupt' | 'error'
  readonly events?: number
  readonly tornBytes?: number
  readonly code?: string
  readonly message?: string
}

export interface RootVerification {
  readonly root: string
  readonly logs: readonly VerifiedLog[]
}

/**
 * Reads every committed log of a JSONL root in full and reports torn tails
 * and corruption, including logs whose header is too damaged to list, and
 * the sessions the query index lists whose log is missing. Opens the root
 * and its index read-only: never writes, never creates, never repairs (a
 * directory that is not a dsh root is `HOST_ROOT_INVALID`). One bad log
 * never hides the others.
 */
export async function verifyRoot(root: string): Promise<RootVerification> {
  const path = prepareRoot(root, true)
  let persistence: JsonlPersistence
  try {
    persistence = createJsonlPersistence({ root: path, readOnly: true })
  } catch (error) {
    throw rootErrorOf(error, path, 'verify reads existing roots only.')
  }
  try {
    const logs = await verifyAll(persistence)
    return { root: path, logs: [...logs, ...(await missingLogs(path, persistence, logs))] }
  } finally {
    await persistence.close()
  }
}

/** Listing pages of the largest size the query contract allows. */
const CATALOG_PAGE = 1000

/**
 * The index's readers warn about an index they cannot use; its health is
 * `checkDerivedFiles`' report, and such a reader lists from the logs, which
 * name no missing log.
 */
const quiet: Logger = { warn: () => {}, error: () => {} }

/**
 * Sessions the catalog lists whose log is gone: a log removed outside dsh
 * is no change in the persistence feed, so the query index keeps listing
 * the session (`dsh sessions` shows it, every read of it fails). The catalog
 * is read as every read-only command reads it (the index plus what the feed
 * names since), so a session deleted through dsh is not reported. A session
 * whose log exists after all (created since the logs were listed, or too
 * damaged to list, which the log pass reports) is not reported either.
 */
async function missingLogs(root: string, persistence: JsonlPersistence, verified: readonly VerifiedLog[]): Promise<VerifiedLog[]> {
  const seen = new Set(verified.map((log) => log.id))
  const missing: VerifiedLog[] = []
  const host = await createQueryHost({ root, readOnly: true, logger: quiet })
  try {
    let cursor: string | undefined
    do {
      const page = await host.query.listSessions({ limit: CATALOG_PAGE, ...(cursor === undefined ? {} : { cursor }) })
      for (const { header } of page.records) {
        if (seen.has(header.id) || !(await logIsAbsent(persistence, header.id))) continue
        const file = persistence.logPath(header.id)
        missing.push({
          id: header.id,
          status: 'error',
          code: 'SESSION_PERSISTENCE_NOT_FOUND',
          message: escapeTerminal(
            `The query index lists session ${JSON.stringify(header.id)}, but its log ${file} is missing (removed outside dsh?): restore it from a backup; or, to give the session up, remove its directory and rebuild the index (dsh reindex).`,
          ),
        })
      }
      cursor = page.nextCursor
    } while (cursor !== undefined)
  } finally {
    await host.dispose()
  }
  return missing
}

/** No log file for `id`; a log that exists but cannot be read (a typed persistence error) is not absent: the log pass reports it. */
async function logIsAbsent(persistence: JsonlPersistence, id: SessionId): Promise<boolean> {
  try {
    return (await persistence.stat(id)) === undefined
  } catch (error) {
    if (isDshError(error)) return false
    throw error
  }
}

/**
 * The same check over a PostgreSQL store: every session's batches read and
 * checked (a table has no torn tail), damaged rows reported. Opened
 * read-only: no migration, no lease, nothing written; an unmigrated database
 * is refused. `root` in the result is the server location (no credentials).
 */
export async function verifyPostgres(options: PostgresHostOptions): Promise<RootVerification> {
  const { createPostgresPersistence } = await import('@dsh/session-persistence-postgres')
  const pool = options.pool ?? (await newPool(options))
  try {
    const persistence = await createPostgresPersistence({ pool, readOnly: true })
    try {
      return { root: postgresLocation(options), logs: await verifyAll(persistence) }
    } finally {
      await persistence.close()
    }
  } finally {
    if (options.pool === undefined) await pool.end()
  }
}

/** What both backends offer for verification (the JSONL backend's shapes). */
interface VerifiablePersistence {
  list(): Promise<readonly { readonly header: { readonly id: SessionId } }[]>
  verify(id: SessionId): Promise<{ readonly events: number; readonly tornBytes: number }>
  /** JSONL names the directory of a log too damaged to name its session; PostgreSQL always knows the id. */
  damagedLogs(): readonly {
    readonly dir?: string
    readonly id: string | { readonly hashed: true } | undefined
    readonly code: string
    readonly message: string
  }[]
}

/** Verifies every listed log, then reports the damaged ones listing left out; one bad log never hides the others. */
async function verifyAll(persistence: VerifiablePersistence): Promise<VerifiedLog[]> {
  const logs: VerifiedLog[] = []
  for (const record of await persistence.list()) {
    try {
      const report = await persistence.verify(record.header.id)
      logs.push({
        id: record.header.id,
        status: report.tornBytes > 0 ? 'torn' : 'ok',
        events: report.events,
        tornBytes: report.tornBytes,
      })
    } catch (error) {
      const corrupt = isDshError(error, 'SESSION_PERSISTENCE_CORRUPT')
      logs.push({
        id: record.header.id,
        status: corrupt ? 'corrupt' : 'error',
        code: isDshError(error) ? error.code : 'UNKNOWN',
        message: error instanceof Error ? error.message : String(error),
      })
    }
  }
  for (const damaged of persistence.damagedLogs()) {
    logs.push({
      id: typeof damaged.id === 'string' ? damaged.id : (damaged.dir ?? '(unnamed)'),
      status: 'corrupt',
      code: damaged.code,
      message: damaged.message,
    })
  }
  return logs
}
