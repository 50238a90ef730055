import { randomUUID } from 'node:crypto'
import type { SessionPersistence } from '@dsh/session-persistence'
import {
  describePersistenceContract,
  type PersistenceContractFactoryOptions,
  type PersistenceContractHarness,
} from '@dsh/session-persistence/testing'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { createTestDatabase } from '@dsh/session-persistence-postgres/testing'
import { testCluster } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { pruneChanges } from '../src/feed-pruning.js'
import { applyMigrations } from '../src/migrations.js'
import { SESSION_MIGRATIONS, SESSIONS_COMPONENT } from '../src/schema.js'

// A contract "root" is a database on the run's cluster. The suite runs twice:
// on a fresh database (created at the newest schema at once) and on one
// created at schema 3 and upgraded in place by the first open.
const harness =
  (upgraded: boolean) =>
  async (options?: PersistenceContractFactoryOptions): Promise<PersistenceContractHarness> => {
    const owned = options?.root === undefined
    const root = options?.root ?? (await createTestDatabase(testCluster(), `c_${randomUUID().replaceAll('-', '')}`))
    if (owned && upgraded) {
      const pool = new pg.Pool({ connectionString: root, max: 1 })
      try {
        await applyMigrations(pool, SESSIONS_COMPONENT, SESSION_MIGRATIONS.slice(0, 3))
      } finally {
        await pool.end()
      }
    }
    const pools: pg.Pool[] = []
    const open = async (): Promise<SessionPersistence> => {
      const pool = new pg.Pool({ connectionString: root, max: 4 })
      pools.push(pool)
      return createPostgresPersistence({ pool })
    }
    const instances: SessionPersistence[] = [await open()]
    const sql = async (text: string, values: unknown[]): Promise<number> => {
      const client = new pg.Client({ connectionString: root })
      await client.connect()
      try {
        return (await client.query(text, values)).rowCount ?? 0
      } finally {
        await client.end()
      }
    }
    const changed = (what: string, rows: number): void => {
      if (rows !== 1) throw new Error(`${what}: ${rows} rows changed, expected 1`)
    }
    return {
      // A batch row past the session's next_seq: what readers must treat as not committed.
      async tearTail(id: string) {
        const rows = await sql(
          `INSERT INTO dsh_batches (id_key, sid, first_seq, count, plain_length, checksum, body)
         SELECT id_key, sid, next_seq, 1, 1, 0, '\\x28b52ffd'::bytea FROM dsh_sessions WHERE id = convert_to($1, 'UTF8')`,
          [id],
        )
        changed(`tearing the tail of ${id}`, rows)
      },
      // One byte of the stored body flipped.
      async damageBatch(id: string, seq: number) {
        const rows = await sql(
          `UPDATE dsh_batches b SET body = set_byte(b.body, length(b.body) / 2, get_byte(b.body, length(b.body) / 2) # 90)
         FROM dsh_sessions s WHERE s.id = convert_to($1, 'UTF8') AND b.id_key = s.id_key AND b.sid = s.sid AND b.first_seq <= $2 AND $2 < b.first_seq + b.count`,
          [id, seq],
        )
        changed(`damaging event ${seq} of ${id}`, rows)
      },
      async storedAttachments() {
        const client = new pg.Client({ connectionString: root })
        await client.connect()
        try {
          const { rows } = await client.query<{ place: string; bytes: number }>(
            "SELECT encode(id_key, 'hex') || '/' || encode(digest, 'hex') AS place, length(body) AS bytes FROM dsh_attachments ORDER BY 1",
          )
          return rows
        } finally {
          await client.end()
        }
      },
      async pruneFeed() {
        const pool = new pg.Pool({ connectionString: root, max: 1 })
        try {
          await pruneChanges(pool, -1)
        } finally {
          await pool.end()
        }
      },
      get persistence() {
        return instances[0]!
      },
      root,
      async reopen() {
        await instances.at(-1)!.close()
        const next = await open()
        instances.push(next)
        return next
      },
      async cleanup() {
        for (const instance of instances) await instance.close()
        for (const pool of pools) await pool.end()
        if (owned) {
          const admin = new pg.Client({ connectionString: root.replace(/\/[^/]+$/, '/postgres') })
          await admin.connect()
          const name = new URL(root).pathname.slice(1)
          const { rows } = await admin.query<{ q: string }>('SELECT quote_ident($1) AS q', [name])
          await admin.query(`DROP DATABASE IF EXISTS ${rows[0]!.q} WITH (FORCE)`)
          await admin.end()
        }
      },
    }
  }

describePersistenceContract('postgres', harness(false))
describePersistenceContract('postgres, upgraded in place from schema 3', harness(true))
