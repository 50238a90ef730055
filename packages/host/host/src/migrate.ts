import type { MigrationReport } from '@dsh/session-persistence-postgres'
import { newPool, type PostgresHostOptions, postgresLocation } from './postgres.js'

/** What `migratePostgres` did: one report per backend, in the order they ran. */
export interface PostgresMigration {
  /** The server and database (no credentials). */
  readonly location: string
  /** `sessions`, then `search` and `projection-cache` (both build on the session tables): `from` → `to` each. */
  readonly components: readonly MigrationReport[]
}

/**
 * Brings the three PostgreSQL backends of a host (persistence, query,
 * projection cache) to the newest schema this dsh knows, without serving:
 * what `dsh migrate` runs. Idempotent and safe from several hosts at once
 * (each step serializes on the backends' advisory lock). A database newer
 * than this code is refused with `POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW` and
 * left as it is: schemas never migrate down. `partitions` chooses the hash
 * partition count of the per-session tables when they are created (default
 * 16); a database partitioned otherwise is refused.
 */
export async function migratePostgres(options: PostgresHostOptions & { readonly partitions?: number }): Promise<PostgresMigration> {
  const { migrate } = await import('@dsh/session-persistence-postgres')
  const { migrateSearch } = await import('@dsh/session-query-postgres')
  const { migrateCache } = await import('@dsh/session-projection-cache-postgres')
  const pool = options.pool ?? (await newPool(options))
  try {
    // The session tables migrate first: they record the partition count the other two follow.
    const partitions = options.partitions === undefined ? {} : { partitions: options.partitions }
    const components = [await migrate(pool, partitions), await migrateSearch(pool, partitions), await migrateCache(pool, partitions)]
    return { location: postgresLocation(options), components }
  } finally {
    if (options.pool === undefined) await pool.end()
  }
}
