import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SessionId } from '@dsh/session'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { distributionViolations, generateHeaderSessions } from '@dsh/session-persistence-postgres/testing'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { encodeBatch } from '../src/batch-codec.js'
import { applyMigrations, schemaVersion } from '../src/migrations.js'
import { SESSION_MIGRATIONS, SESSIONS_COMPONENT } from '../src/schema.js'
import { events } from './fixtures.js'

// The upgrade in place from schema 3 (unpartitioned) to the partitioned
// layout, on 100,000 stored sessions, by a real process running the
// migration (the worker imports the built package): killed with SIGKILL
// mid-way, then run again to the end.
const here = dirname(fileURLToPath(import.meta.url))
const SESSIONS = 100_000

/** Every session's header row and batch rows, one md5 per session, kept in a table of its own outside the session tables. */
async function digest(pool: pg.Pool, into: string): Promise<void> {
  await pool.query(
    `CREATE TABLE check_digests.${into} AS
     SELECT s.id, md5(concat_ws('|', s.sid, s.header, s.created_at, s.parent_key, s.origin, s.cwd_key, s.inherited, s.next_seq,
                                f.id, s.fork_checksum, b.rows)) AS d
     FROM dsh_sessions s LEFT JOIN dsh_sessions f ON f.sid = s.fork_sid
     LEFT JOIN (SELECT sid, string_agg(concat_ws(':', first_seq, count, plain_length, checksum, md5(body), xid), ',' ORDER BY first_seq) AS rows
                FROM dsh_batches GROUP BY sid) b ON b.sid = s.sid`,
  )
}

async function counts(pool: pg.Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<Record<string, number>>(
    `SELECT (SELECT count(*) FROM dsh_sessions)::int AS sessions, (SELECT count(*) FROM dsh_batches)::int AS batches,
            (SELECT count(*) FROM dsh_changes)::int AS changes`,
  )
  return rows[0]!
}

/** The migration worker: resolves its exit once it is gone; `waiting` is its backend's statement while it waits for a lock. */
function migrator(url: string) {
  const child = spawn(process.execPath, [join(here, 'workers', 'migrator.mjs'), url], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  )
  return { child, exited, output: () => out }
}

describe('migrating schema 3 in place', () => {
  it(`${SESSIONS.toLocaleString('en')} sessions: a migration killed mid-way leaves schema 3 whole and current; the next run finishes; every row and digest is equal`, async () => {
    const db = await freshDatabase()
    const blocker = new pg.Client({ connectionString: db.url })
    try {
      await applyMigrations(db.pool, SESSIONS_COMPONENT, SESSION_MIGRATIONS.slice(0, 3))
      await generateHeaderSessions(db.pool, { count: SESSIONS, events: 3, childrenPerRoot: 4 })
      // One fork by reference in the schema 3 layout: it inherits the 3 events of gen-00000001 and has one of its own.
      const own = encodeBatch(events(3, 1, 'own'))
      await db.pool.query(
        `WITH src AS (SELECT s.sid, b.checksum FROM dsh_sessions s JOIN dsh_batches b USING (sid) WHERE s.id = convert_to('gen-00000001', 'UTF8')),
              f AS (INSERT INTO dsh_sessions (id_key, id, header, created_at, inherited, fork_sid, fork_checksum, next_seq)
                    SELECT sha256(convert_to('fork', 'UTF8')), convert_to('fork', 'UTF8'),
                           replace(header, '"gen-00000001"', '"fork"'), created_at, 3, src.sid, src.checksum, 4
                    FROM dsh_sessions, src WHERE id = convert_to('gen-00000001', 'UTF8') RETURNING sid)
         INSERT INTO dsh_batches (sid, first_seq, count, plain_length, checksum, body) SELECT f.sid, 3, $1, $2, $3, $4 FROM f`,
        [own.count, own.plainLength, own.checksum, own.body],
      )
      await db.pool.query('CREATE SCHEMA check_digests')
      await digest(db.pool, 'before')
      const before = await counts(db.pool)
      expect(before).toEqual({ sessions: SESSIONS + 1, batches: SESSIONS + 1, changes: SESSIONS })

      // The test holds dsh_batches (ACCESS SHARE, in an open transaction): the migration moves and copies
      // dsh_sessions, then waits to move dsh_batches. It is killed there.
      await blocker.connect()
      await blocker.query('BEGIN')
      await blocker.query('LOCK TABLE dsh_batches IN ACCESS SHARE MODE')
      const first = migrator(db.url)
      for (;;) {
        const { rows } = await db.pool.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
           AND query LIKE 'ALTER TABLE dsh_batches SET SCHEMA%'`,
        )
        if (rows.length > 0) break
        const done = await Promise.race([first.exited, new Promise((resolve) => setTimeout(resolve, 20, undefined))])
        if (done !== undefined) throw new Error(`the migration ended before it was held: ${first.output()}`)
      }
      // The sessions copy ran inside the transaction the kill abandons.
      first.child.kill('SIGKILL')
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' })
      await blocker.query('ROLLBACK')
      // The abandoned transaction rolls back once its backend sees the client gone; until then it holds the migration lock.
      for (;;) {
        const { rows } = await db.pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'ALTER TABLE dsh_%'`,
        )
        if (rows.length === 0) break
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      // Nothing of the step is left: schema 3 is current and whole.
      expect(await schemaVersion(db.pool, SESSIONS_COMPONENT)).toBe(3)
      expect((await db.pool.query("SELECT 1 FROM pg_namespace WHERE nspname = 'dsh_migrating_sessions'")).rows).toEqual([])
      expect((await db.pool.query("SELECT relkind FROM pg_class WHERE relname = 'dsh_sessions'")).rows).toEqual([{ relkind: 'r' }])
      expect(await counts(db.pool)).toEqual(before)
      await expect(createPostgresPersistence({ pool: db.pool, migrate: false })).rejects.toMatchObject({
        code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
      })

      // The next run finishes the step.
      const second = migrator(db.url)
      expect(await second.exited).toEqual({ code: 0, signal: null })
      expect(second.output()).toContain(`migrated {"component":"sessions","from":3,"to":${SESSION_MIGRATIONS.length}}`)
      expect(await distributionViolations(db.pool)).toEqual([])
      expect(await counts(db.pool)).toEqual(before)
      await digest(db.pool, 'after')
      const { rows: differ } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM check_digests.before b FULL JOIN check_digests.after a USING (id) WHERE a.d IS DISTINCT FROM b.d`,
      )
      expect(differ).toEqual([{ n: 0 }])
      // The fork's reference carries its source's key.
      const { rows: fork } = await db.pool.query<{ same: boolean }>(
        `SELECT f.fork_key = s.id_key AS same FROM dsh_sessions f JOIN dsh_sessions s ON s.sid = f.fork_sid WHERE f.id = convert_to('fork', 'UTF8')`,
      )
      expect(fork).toEqual([{ same: true }])

      // The migrated database serves: reads, a fork's inherited prefix, an append, the delete refusal, a new session's sid.
      const p = await createPostgresPersistence({ pool: db.pool, migrate: false })
      try {
        expect((await p.inspect(SessionId('gen-00099999'))).events.map((e) => e.data)).toEqual([
          { text: 'm0' },
          { text: 'm1' },
          { text: 'm2' },
        ])
        expect((await p.inspect(SessionId('fork'))).events.map((e) => e.data)).toEqual([
          { text: 'm0' },
          { text: 'm1' },
          { text: 'm2' },
          { text: 'own3' },
        ])
        await expect(p.delete(SessionId('gen-00000001'))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
        const fresh = await p.inspect(SessionId('gen-00000002'))
        await p.append({ header: fresh.header, inheritedEventCount: fresh.inheritedEventCount }, events(3, 1))
        expect((await p.inspect(SessionId('gen-00000002'))).events).toHaveLength(4)
        const { rows: sids } = await db.pool.query<{ ok: boolean }>(
          `SELECT (SELECT max(sid) FROM dsh_sessions) < nextval(pg_get_serial_sequence('dsh_sessions', 'sid')) AS ok`,
        )
        expect(sids).toEqual([{ ok: true }])
      } finally {
        await p.close()
      }
    } finally {
      await blocker.end().catch(() => {})
      await db.end()
    }
  })
})
