import { join } from 'node:path'
import { definePlugin } from '@dsh/context'
import type { IndexProgress } from '@dsh/session-query'
import type { SqliteSessionQueryOptions } from './query-types.js'
import { createSqliteSessionQuery } from './sqlite-query.js'

/**
 * Where a session root keeps its query index: `<root>/.dsh/index.sqlite`, in
 * the one dsh-owned directory (0700) that holds every derived file of a root.
 */
export function defaultIndexPath(root: string): string {
  return join(root, '.dsh', 'index.sqlite')
}

export interface SqliteSessionQueryPluginOptions
  extends Pick<
    SqliteSessionQueryOptions,
    | 'readOnly'
    | 'reconcileOnOpen'
    | 'maxStalenessMs'
    | 'readConcurrency'
    | 'check'
    | 'budget'
    | 'worker'
    | 'overlayLimit'
    | 'indexDelayMs'
    | 'coldLimit'
  > {
  /** The index file (see `defaultIndexPath`). */
  readonly path: string
  readonly onProgress?: (progress: IndexProgress) => void
}

/**
 * Provides service `sessionQuery` backed by the SQLite index over the
 * `sessions` store and `sessionPersistence`. A writer (the default)
 * activates by opening (or building) the index and bringing it up to date,
 * keeps it current as sessions change, and on disposal records this
 * process's last changes and closes it; with `readOnly` the index is only
 * read.
 */
export const sqliteSessionQueryPlugin = (options: SqliteSessionQueryPluginOptions) =>
  definePlugin({
    name: 'sessionQuery (sqlite)',
    inject: { required: ['sessions', 'sessionPersistence'], optional: ['logger'] },
    async activate(ctx) {
      const query = await createSqliteSessionQuery({
        ...options,
        sessions: ctx.sessions,
        persistence: ctx.sessionPersistence,
        context: ctx,
        ...(ctx.logger === undefined ? {} : { logger: ctx.logger }),
      })
      ctx.onDispose(() => query.close())
      ctx.provide('sessionQuery', query)
    },
  })
