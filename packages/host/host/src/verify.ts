import { isDshError } from '@dsh/context'
import type { SessionId } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { HostError } from './errors.js'
import { type PostgresHostOptions, postgresLocation } from './postgres.js'
import { prepareRoot } from './root.js'

/** One log as `verifyRoot` found it. */
export interface VerifiedLog {
  /** The session id; for a log too damaged to name itself, its directory. */
  readonly id: string
  /** `torn`: committed data is intact; an incomplete final batch follows (reads ignore it, `load` truncates it). */
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
 * and corruption, including logs whose header is too damaged to list. Opens
 * the root read-only: never writes, never creates (a directory that is not a
 * dsh root is `HOST_ROOT_INVALID`). One bad log never hides the others.
 */
export async function verifyRoot(root: string): Promise<RootVerification> {
  const path = prepareRoot(root, true)
  let persistence: ReturnType<typeof createJsonlPersistence>
  try {
    persistence = createJsonlPersistence({ root: path, readOnly: true })
  } catch (error) {
    if (isDshError(error, 'JSONL_PERSISTENCE_NOT_A_ROOT')) {
      throw new HostError(
        'HOST_ROOT_INVALID',
        `${path} is not a dsh session root (it has no persistence marker); verify reads existing roots only.`,
        {
          cause: error,
          details: { root: path },
        },
      )
    }
    throw error
  }
  return { root: path, logs: await verifyAll(persistence) }
}

/**
 * The same check over a PostgreSQL store: every session's batches read and
 * checked (a table has no torn tail), damaged rows reported. Opened
 * read-only: no migration, no lease, nothing written; an unmigrated database
 * is refused. `root` in the result is the server location (no credentials).
 */
export async function verifyPostgres(options: PostgresHostOptions): Promise<RootVerification> {
  const { default: pgModule } = await import('pg')
  const { createPostgresPersistence } = await import('@dsh/session-persistence-postgres')
  const pool = options.pool ?? new pgModule.Pool({ connectionString: options.connectionString })
  try {
    const persistence = await createPostgresPersistence({ pool, readOnly: true })
    return { root: postgresLocation(options), logs: await verifyAll(persistence) }
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
  close(): Promise<void>
}

/** Verifies every listed log, then reports the damaged ones listing left out; one bad log never hides the others. Closes `persistence`. */
async function verifyAll(persistence: VerifiablePersistence): Promise<VerifiedLog[]> {
  const logs: VerifiedLog[] = []
  try {
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
  } finally {
    await persistence.close()
  }
  return logs
}
