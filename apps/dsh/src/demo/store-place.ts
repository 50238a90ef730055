import type { Logger } from '@dsh/context'
import { createHost } from '@dsh/host'
import { SessionId } from '@dsh/session'
import { poolConfig } from '@dsh/session-persistence-postgres'
import pg from 'pg'
import { CliError } from '../errors.js'
import { DEMO_IDS } from './ids.js'
import type { DemoPlace } from './place.js'
import { CRASH_WORKER_APPLICATION, CRASH_WORKER_STORE_ENV } from './worker-env.js'

const DEMO_SESSION_IDS: readonly string[] = Object.values(DEMO_IDS)

/**
 * The demo in a PostgreSQL store. The demo owns one pool, shared by every
 * phase's host (`postgres: { pool }`), and uses it for what no API offers on
 * purpose: flipping a byte of a stored batch and deleting checkpoint rows
 * (plain, parameterised SQL). It only ever deletes its own sessions.
 */
export function storeDemoPlace(connectionString: string, location: string, logger?: Logger): DemoPlace {
  const pool = new pg.Pool(poolConfig(connectionString))
  return {
    location,
    prepare: async () => {
      // A writable host migrates the schema (all three backends) on open.
      const host = await createHost({ postgres: { pool }, ...(logger === undefined ? {} : { logger }) })
      try {
        const foreign = (await host.persistence.list()).map((h) => h.header.id as string).filter((id) => !DEMO_SESSION_IDS.includes(id))
        if (foreign.length > 0) {
          throw new CliError(
            'CLI_STORE_NOT_EMPTY',
            `${location} holds ${foreign.length} session(s) the demo did not make (for example '${foreign[0]}'); run 'dsh demo --store' on an empty database.`,
          )
        }
        // Children before parents (a fork references its source's prefix).
        for (const id of [...DEMO_SESSION_IDS].reverse()) await host.persistence.delete(SessionId(id), { materializeDependants: true })
      } finally {
        await host.dispose()
      }
      await deleteCheckpoints(pool)
    },
    hostOptions: () => ({ postgres: { pool } }),
    worker: () => ({ args: ['store'], env: { [CRASH_WORKER_STORE_ENV]: connectionString } }),
    afterCrash: async () => {
      // The server ends a killed client's backends (and with them its advisory
      // locks, the writer leases) when it sees the socket close.
      const deadline = Date.now() + 60_000
      for (;;) {
        const { rows } = await pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()',
          [CRASH_WORKER_APPLICATION],
        )
        if (rows[0]!.n === 0) return
        if (Date.now() > deadline) throw new CliError('CLI_DEMO_FAILED', 'The killed crash worker still holds connections after 60 s.')
        await new Promise((r) => setTimeout(r, 20))
      }
    },
    corrupt: async (id) => {
      const { rows } = await pool.query<{ first_seq: number }>(
        `UPDATE dsh_batches b
            SET body = set_byte(b.body, length(b.body) / 2, get_byte(b.body, length(b.body) / 2) # 90)
           FROM (SELECT b2.sid, max(b2.first_seq) AS first_seq
                   FROM dsh_batches b2 JOIN dsh_sessions s ON s.sid = b2.sid
                  WHERE s.id = $1 GROUP BY b2.sid) last
          WHERE b.sid = last.sid AND b.first_seq = last.first_seq
        RETURNING b.first_seq`,
        [Buffer.from(id, 'utf8')],
      )
      if (rows.length !== 1) throw new CliError('CLI_DEMO_FAILED', `The demo found no committed batch of ${id} to damage.`)
      return `the batch of ${id} from seq ${rows[0]!.first_seq} (dsh_batches.body) in ${location}`
    },
    dropCache: () => deleteCheckpoints(pool),
    close: () => pool.end(),
  }
}

/** The demo sessions' checkpoint rows (derived data: the next cold listing reads bodies instead). */
async function deleteCheckpoints(pool: pg.Pool): Promise<void> {
  await pool.query('DELETE FROM dsh_projection_checkpoints WHERE session_id = ANY($1::bytea[])', [
    DEMO_SESSION_IDS.map((id) => Buffer.from(id, 'utf8')),
  ])
}
