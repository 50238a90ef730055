import { isDshError } from '@dsh/context'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { HostError } from './errors.js'
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
        id: typeof damaged.id === 'string' ? damaged.id : damaged.dir,
        status: 'corrupt',
        code: damaged.code,
        message: damaged.message,
      })
    }
  } finally {
    await persistence.close()
  }
  return { root: path, logs }
}
