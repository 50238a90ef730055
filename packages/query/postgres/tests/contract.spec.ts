import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { sessionQueryContractSuite } from '@dsh/session-query/testing'
import { createPostgresSessionQuery, migrateSearch } from '@dsh/session-query-postgres'
import type pg from 'pg'

// Each test gets its own database; the query reads the same pool the persistence writes.
const pools = new WeakMap<object, pg.Pool>()

/** The contract, run with a query that indexes (`readOnly` false) or one that never writes and searches what the index lacks from memory. */
function suite(name: string, readOnly: boolean) {
  sessionQueryContractSuite(name, {
    corruptible: true,
    search: true,
    async createPersistence() {
      const db = await freshDatabase()
      const persistence = await createPostgresPersistence({ pool: db.pool })
      // A read-only query needs the search tables to exist (it never creates them).
      if (readOnly) await migrateSearch(db.pool)
      pools.set(persistence, db.pool)
      return {
        persistence,
        // Flips the zstd magic of every batch: the header still lists, the body fails its read.
        async corrupt(id: string) {
          await db.pool.query(
            `UPDATE dsh_batches SET body = overlay(body placing '\\x00000000'::bytea from 1 for 4) WHERE sid = (SELECT sid FROM dsh_sessions WHERE id_key = $1)`,
            [keyOf(id)],
          )
        },
        async cleanup() {
          await persistence.close()
          await db.end()
        },
      }
    },
    openQuery({ sessions, persistence }) {
      return createPostgresSessionQuery({
        pool: pools.get(persistence)!,
        sessions,
        persistence,
        readOnly,
        logger: { warn: () => {}, error: () => {} },
      })
    },
  })
}

suite('postgres', false)
suite('postgres (read-only search)', true)
