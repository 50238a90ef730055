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
  extends Pick<SqliteSessionQueryOptions, 'reconcileOnOpen' | 'maxStalenessMs' | 'readConcurrency' | 'check' | 'budget' | 'worker'> {
  /** The index file (see `defaultIndexPath`). */
  readonly path: string
  readonly onProgress?: (progress: IndexProgress) => void
}

/**
 * Provides service `sessionQuery` backed by the SQLite index over the
 * `sessions` store and `sessionPersistence`. Activation opens (or rebuilds)
 * and reconciles the index; disposal closes it.
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
