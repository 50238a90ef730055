import { Context, isDshError } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import type { IndexProgress } from '@dsh/session-query'
import { createSqliteSessionQuery, type ReconcileReport } from '@dsh/session-query-sqlite'
import { HostError } from './errors.js'
import { derivedPaths } from './paths.js'
import { prepareRoot } from './root.js'

export interface RebuildIndexOptions {
  readonly root: string
  readonly onProgress?: (progress: IndexProgress) => void
  readonly signal?: AbortSignal
}

/**
 * Rebuilds a root's derived query index from its logs. Opens only what a
 * rebuild needs (no reconcile on open, so the index is built once); the logs
 * are opened read-only, so a rebuild never writes a log. The root must be an
 * existing dsh root (`HOST_ROOT_INVALID` otherwise).
 */
export async function rebuildIndex(options: RebuildIndexOptions): Promise<ReconcileReport & { readonly root: string }> {
  const root = prepareRoot(options.root, true)
  let persistence: ReturnType<typeof createJsonlPersistence>
  try {
    persistence = createJsonlPersistence({ root, readOnly: true })
  } catch (error) {
    if (isDshError(error, 'JSONL_PERSISTENCE_NOT_A_ROOT')) {
      throw new HostError(
        'HOST_ROOT_INVALID',
        `${root} is not a dsh session root (it has no persistence marker); reindex works on existing roots only.`,
        {
          cause: error,
          details: { root },
        },
      )
    }
    throw error
  }
  const ctx = new Context()
  try {
    const query = await createSqliteSessionQuery({
      sessions: new SessionStore(ctx),
      persistence,
      path: derivedPaths(root).index,
      reconcileOnOpen: false,
      ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    })
    try {
      return { root, ...(await query.rebuild(options.signal)) }
    } finally {
      await query.close()
    }
  } finally {
    await persistence.close()
    await ctx.dispose()
  }
}
