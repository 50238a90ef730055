import { definePlugin } from '@dsh/context'
import type pg from 'pg'
import { createPostgresSessionQuery, type PostgresSessionQueryOptions } from './query.js'

export interface PostgresSessionQueryPluginOptions
  extends Pick<PostgresSessionQueryOptions, 'migrate' | 'indexConcurrency' | 'readOnly' | 'overlayLimit' | 'overlayTextLimit'> {
  /** The pool the persistence backend uses (one database for all three backends). */
  readonly pool: pg.Pool
}

/**
 * Provides service `sessionQuery` over the PostgreSQL session tables, the
 * `sessions` store and `sessionPersistence` (which must be the PostgreSQL
 * backend over the same pool). Disposal closes it; the pool belongs to the caller.
 */
export const postgresSessionQueryPlugin = (options: PostgresSessionQueryPluginOptions) =>
  definePlugin({
    name: 'sessionQuery (postgres)',
    inject: { required: ['sessions', 'sessionPersistence'], optional: ['logger'] },
    async activate(ctx) {
      const query = await createPostgresSessionQuery({
        ...options,
        sessions: ctx.sessions,
        persistence: ctx.sessionPersistence,
        ...(ctx.logger === undefined ? {} : { logger: ctx.logger }),
      })
      ctx.onDispose(() => query.close())
      ctx.provide('sessionQuery', query)
    },
  })
