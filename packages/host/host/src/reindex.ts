import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import type { IndexProgress } from '@dsh/session-query'
import { buildIndexFile, type ReconcileReport } from '@dsh/session-query-sqlite'
import { derivedPaths } from './paths.js'
import { prepareRoot, rootErrorOf } from './root.js'

export interface RebuildIndexOptions {
  readonly root: string
  readonly onProgress?: (progress: IndexProgress) => void
  readonly signal?: AbortSignal
  /**
   * Awaited once the new index is complete, before it replaces the old one
   * (readers keep answering from the old one until then): how a test holds
   * a rebuild open to query during it.
   */
  readonly beforeSwap?: () => Promise<void>
}

/**
 * Rebuilds a root's derived query index from its logs: into a new file,
 * swapped in with one rename, so readers and writers keep using the old
 * index meanwhile (and writers catch the new one up from the change-feed
 * cursor it records). The old index is never opened for writing, and a
 * rebuild that fails (a full disk) leaves it as it was with nothing else
 * behind. The logs are opened read-only, so a rebuild never writes a log.
 * The root must be an existing dsh root (`HOST_ROOT_INVALID` otherwise).
 */
export async function rebuildIndex(options: RebuildIndexOptions): Promise<ReconcileReport & { readonly root: string }> {
  const root = prepareRoot(options.root, true)
  let persistence: ReturnType<typeof createJsonlPersistence>
  try {
    persistence = createJsonlPersistence({ root, readOnly: true })
  } catch (error) {
    throw rootErrorOf(error, root, 'reindex works on existing roots only.')
  }
  try {
    const report = await buildIndexFile({
      persistence,
      path: derivedPaths(root).index,
      ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(options.beforeSwap === undefined ? {} : { beforeSwap: options.beforeSwap }),
    })
    return { root, ...report }
  } finally {
    await persistence.close()
  }
}
