import type { Context } from '@dsh/context'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import {
  BULK_LOAD_SETTINGS,
  buildScaleCorpus,
  captureStatements,
  composeScaleHost,
  PARENT,
  replayStatements,
  SCALE_CHILDREN,
  SCALE_PAGE,
  SCALE_REAL_SESSIONS,
} from '../src/fixtures/pg-scale.js'
import { type BenchPostgres, startBenchPostgres, tableBytes } from '../src/fixtures/postgres.js'

// The pg-scale benchmark's short form, for CI: the same corpus at 100,000
// header-only sessions, every verdict a count (rows listed, rows the raw
// statements return, bytes), none a time.

const SESSIONS = 100_000

let db: BenchPostgres | undefined
let ctx: Context | undefined
afterAll(async () => {
  await ctx?.dispose()
  await db?.close()
})

describe('pg-scale (short form)', () => {
  it('100,000 generated sessions, 1,000 with events, a parent with 200 children: the warm listing has every child, a page has 50 rows, the captured raw statements answer the same rows, bytes per session are measured', async () => {
    db = await startBenchPostgres({ max: 8, settings: BULK_LOAD_SETTINGS, database: 'scale' })
    const corpus = await buildScaleCorpus(db.pool, { count: SESSIONS, real: true })
    // The generated rows, the real ones, the parent and its children.
    expect(corpus.total).toBe(SESSIONS + SCALE_REAL_SESSIONS + 1 + SCALE_CHILDREN)

    ctx = await composeScaleHost(db.pool)
    const subagents = ctx.require('subagents')
    const query = ctx.require('sessionQuery')
    const explained = await subagents.explainChildren(PARENT)
    expect(explained).toHaveLength(SCALE_CHILDREN)
    expect(explained.filter((entry) => entry.rung === 2)).toHaveLength(SCALE_CHILDREN)

    let rows: Awaited<ReturnType<typeof subagents.listChildren>> = []
    const listStatements = await captureStatements(async () => {
      rows = await subagents.listChildren(PARENT)
    })
    expect(rows.filter((row) => row.kind === 'child')).toHaveLength(SCALE_CHILDREN)
    // Every statement the warm listing sends, through any client: the children's rows come from one
    // indexed statement on the parent's key; a second one on the children's keys (whether each has
    // children of its own) answers none here. The checkpoint cache answers from its mirror and sends none.
    expect(listStatements).toHaveLength(2)
    const onParentKey = listStatements.filter((s) => s.text.includes('parent_key'))
    expect(onParentKey).toHaveLength(2)
    const answered: number[] = []
    for (const statement of onParentKey) answered.push(await replayStatements(db.pool, [statement]))
    expect(answered).toContain(SCALE_CHILDREN)
    expect(answered.reduce((sum, n) => sum + n, 0)).toBe(SCALE_CHILDREN)

    let page = 0
    const pageStatements = await captureStatements(async () => {
      page = (await query.listSessions({ limit: SCALE_PAGE })).records.length
    })
    expect(page).toBe(SCALE_PAGE)
    expect(pageStatements).toHaveLength(1)
    expect(await replayStatements(db.pool, pageStatements)).toBeGreaterThanOrEqual(SCALE_PAGE)

    const bytes = await tableBytes(db.pool, 'dsh_sessions')
    const perSession = bytes / corpus.total
    expect(perSession).toBeGreaterThan(100)
    expect(perSession).toBeLessThan(2_000)
  }, 600_000)

  it('captures a statement whether it goes through pool.query, a checked-out client or another pool', async () => {
    const own = await startBenchPostgres({ max: 2 })
    const other = new pg.Pool({ connectionString: own.url, max: 1 })
    try {
      const seen = await captureStatements(async () => {
        await own.pool.query('SELECT 1 AS a')
        const client = await own.pool.connect()
        try {
          await client.query('SELECT $1::int AS b', [2])
        } finally {
          client.release()
        }
        await other.query({ text: 'SELECT $1::int AS c', values: [3] })
      })
      expect(seen).toEqual([
        { text: 'SELECT 1 AS a', values: [] },
        { text: 'SELECT $1::int AS b', values: [2] },
        { text: 'SELECT $1::int AS c', values: [3] },
      ])
    } finally {
      await other.end()
      await own.close()
    }
  })
})
