import type { VerifiedLog } from '@dsh/host'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'

/**
 * The session directories of a JSONL root that hold no log while no process
 * is writing one (a log removed outside dsh, or a creation that crashed
 * before its first append), as `verify` rows: `error`,
 * `SESSION_PERSISTENCE_NOT_FOUND`. Listings leave such a directory out and
 * a rebuilt index forgets it, so `verify` and `reindex` name it whether or
 * not an index still lists the session. Opens the root read-only: reads only.
 */
export async function logLessSessions(root: string): Promise<VerifiedLog[]> {
  const persistence = createJsonlPersistence({ root, readOnly: true })
  try {
    return (await persistence.logLessDirs()).map((entry) => ({
      id: typeof entry.id === 'string' ? entry.id : entry.dir,
      status: 'error' as const,
      code: entry.code,
      message: entry.message,
    }))
  } finally {
    await persistence.close()
  }
}
