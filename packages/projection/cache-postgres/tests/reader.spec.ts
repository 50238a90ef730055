import type { SessionHeader } from '@dsh/session'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { type CheckpointReadPool, readCheckpointStates } from '../src/index.js'
import { host, keys, turn } from './helpers.js'

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A cache host writing rows on `db`, and a pool over the same database as a role that may only SELECT the checkpoint table. */
async function setup() {
  const db = await freshDatabase()
  cleanups.push(() => db.end())
  const h = await host({ pool: db.pool })
  cleanups.push(() => h.ctx.dispose())
  const url = new URL(db.url)
  const role = `reader_${url.pathname.slice(1)}`.replace(/[^a-z0-9_]/gi, '_').toLowerCase()
  await db.pool.query(`CREATE ROLE ${role} LOGIN`)
  await db.pool.query(`GRANT SELECT ON dsh_projection_checkpoints TO ${role}`)
  url.username = role
  const readerPool = new pg.Pool({ connectionString: url.toString(), max: 2 })
  cleanups.push(() => readerPool.end())
  const statements: Array<{ text: string; values: unknown[] }> = []
  const counted: CheckpointReadPool = {
    query: ((text: string, values: unknown[]) => {
      statements.push({ text, values })
      return readerPool.query(text, values)
    }) as CheckpointReadPool['query'],
  }
  const stateVersion = (key: string) => h.projections.stateVersionOf(key)!
  const units = [
    { key: keys.messages, stateVersion: stateVersion(keys.messages) },
    { key: keys.turns, stateVersion: stateVersion(keys.turns) },
  ]
  return { ...h, db, pool: counted, statements, units }
}

/** The `turns` unit's state after one turn (the view is the count; a cached row holds the state). */
const TURNS = { ended: 1 }

const entry = (header: SessionHeader, inheritedEventCount = 0) => ({ header, inheritedEventCount })

describe('readCheckpointStates', () => {
  it('answers a page of sessions in one statement: the current rows hit, a session without rows misses', async () => {
    const { sessions, cache, db, pool, statements, units } = await setup()
    const page = Array.from({ length: 40 }, () => sessions.create())
    for (const [i, session] of page.entries()) turn(session, 1, `hello ${i}`)
    const uncached = sessions.create()
    await cache.idle()
    const states = await readCheckpointStates(
      pool,
      [...page, uncached].map((s) => entry(s.header)),
      units,
    )
    expect(statements).toHaveLength(1)
    expect(states).toHaveLength(41)
    for (const i of page.keys()) expect(states[i]).toEqual({ [keys.messages]: { n: 1, last: `hello ${i}` }, [keys.turns]: TURNS })
    expect(states[40]).toEqual({})
    // Pruned to the page's partitions: a one-session page scans one partition of many.
    await readCheckpointStates(pool, [entry(uncached.header)], units)
    const { text, values } = statements[1]!
    const plan = (await db.pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, values)).rows.map((r) => r['QUERY PLAN']).join('\n')
    const partitions = await db.pool.query("SELECT 1 FROM pg_inherits WHERE inhparent = 'dsh_projection_checkpoints'::regclass")
    expect(partitions.rowCount).toBeGreaterThan(1)
    expect(plan.match(/ on dsh_projection_checkpoints_p\d+ /g)).toHaveLength(1)
    statements.splice(1)
    // No entries or no units: no statement at all.
    expect(await readCheckpointStates(pool, [], units)).toEqual([])
    expect(await readCheckpointStates(pool, [entry(uncached.header)], [])).toEqual([{}])
    expect(statements).toHaveLength(1)
  })

  it('misses, never a wrong value: another lifecycle, another cut, another stateVersion, a failed unit, a row that is not JSON', async () => {
    const { sessions, cache, db, pool, units } = await setup()
    const session = sessions.create()
    turn(session, 1, 'hi')
    await cache.idle()
    const header = session.header
    const read = async (e: ReturnType<typeof entry>, u = units) => (await readCheckpointStates(pool, [e], u))[0]
    expect(await read(entry(header))).toEqual({ [keys.messages]: { n: 1, last: 'hi' }, [keys.turns]: TURNS })
    // A stale identity: same id, another lifecycle (any witness field differs).
    expect(await read(entry({ ...header, createdAt: header.createdAt + 1 }))).toEqual({})
    // Another cut.
    expect(await read(entry(header, 1))).toEqual({})
    // Another state version of one unit: that unit misses, the other still hits.
    expect(await read(entry(header), [{ ...units[0]!, stateVersion: units[0]!.stateVersion + 1 }, units[1]!])).toEqual({
      [keys.turns]: TURNS,
    })
    // A failed unit.
    await db.pool.query('UPDATE dsh_projection_checkpoints SET failed = true WHERE key = $1', [keys.turns])
    expect(await read(entry(header))).toEqual({ [keys.messages]: { n: 1, last: 'hi' } })
    // A row that is not JSON.
    await db.pool.query(`UPDATE dsh_projection_checkpoints SET state = '{not json' WHERE key = $1`, [keys.messages])
    expect(await read(entry(header))).toEqual({})
  })

  it('runs as a role that may only SELECT, and writes nothing', async () => {
    const { sessions, cache, db, pool, units } = await setup()
    const session = sessions.create()
    turn(session, 1, 'hi')
    await cache.idle()
    const before = await db.pool.query('SELECT count(*)::int AS n, max(xid::text) AS xid FROM dsh_projection_checkpoints')
    const warnings: unknown[] = []
    const logger = { warn: (...args: unknown[]) => warnings.push(args) } as never
    const states = await readCheckpointStates(pool, [entry(session.header)], units, logger)
    expect(states[0]).toEqual({ [keys.messages]: { n: 1, last: 'hi' }, [keys.turns]: TURNS })
    expect(warnings).toEqual([])
    expect((await db.pool.query('SELECT count(*)::int AS n, max(xid::text) AS xid FROM dsh_projection_checkpoints')).rows).toEqual(
      before.rows,
    )
    // The same role cannot write the table: the reader's statement was answered under SELECT alone.
    await expect(pool.query('DELETE FROM dsh_projection_checkpoints')).rejects.toMatchObject({ code: '42501' })
  })

  it('a database without the checkpoint table misses silently; another read fault is logged and misses', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const warnings: unknown[] = []
    const logger = { warn: (...args: unknown[]) => warnings.push(args) } as never
    const header = { id: 's1', createdAt: 1, delegationDepth: 0 } as unknown as SessionHeader
    const units = [{ key: keys.turns, stateVersion: 1 }]
    expect(await readCheckpointStates(db.pool, [entry(header)], units, logger)).toEqual([{}])
    expect(warnings).toEqual([])
    const broken: CheckpointReadPool = { query: (() => Promise.reject(new Error('connection refused'))) as never }
    expect(await readCheckpointStates(broken, [entry(header)], units, logger)).toEqual([{}])
    expect(warnings).toHaveLength(1)
  })
})
