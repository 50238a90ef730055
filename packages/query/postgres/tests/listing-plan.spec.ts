import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { encodeListCursor, indexFetchLimit, parseListFilter } from '@dsh/session-query/backend'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { listingStatement } from '../src/listing.js'

// The plans of the listing statement over 20,000 session rows: 200 parents
// of 99 children each, three sessions per millisecond. Verdicts are on the
// plan's shape and its row counts (EXPLAIN ANALYZE), never on its times.
const ROWS = 20_000
const T0 = 1_700_000_000_000

interface PlanNode {
  readonly 'Node Type': string
  readonly 'Index Name'?: string
  readonly 'Index Cond'?: string
  readonly Filter?: string
  readonly 'Rows Removed by Filter'?: number
  readonly 'Actual Rows'?: number
  readonly Plans?: readonly PlanNode[]
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)]
}

describe('listing plans on PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>

  beforeAll(async () => {
    db = await freshDatabase()
    const persistence = await createPostgresPersistence({ pool: db.pool })
    await persistence.close()
    await db.pool.query(
      `INSERT INTO dsh_sessions (id_key, id, header, created_at, parent_key, origin, inherited)
       SELECT sha256(convert_to('s' || g, 'UTF8')), convert_to('s' || g, 'UTF8'), '{}', $1::bigint + g / 3,
              CASE WHEN g % 100 = 0 THEN NULL ELSE sha256(convert_to('s' || (g / 100 * 100), 'UTF8')) END,
              CASE WHEN g % 100 = 0 THEN NULL ELSE 'subagent' END, 0
       FROM generate_series(0, $2::integer - 1) AS g`,
      [T0, ROWS],
    )
    await db.pool.query('ANALYZE dsh_sessions')
  })

  afterAll(async () => {
    await db?.end()
  })

  async function plan(filter: Record<string, unknown>): Promise<PlanNode[]> {
    const parsed = parseListFilter(filter)
    const statement = listingStatement(parsed, indexFetchLimit(parsed, 0))
    const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`,
      statement.values,
    )
    return nodes(rows[0]!['QUERY PLAN'][0]!.Plan)
  }

  const cursorAt = (filter: Record<string, unknown>, g: number): string =>
    encodeListCursor(parseListFilter(filter).digest, { createdAt: T0 + Math.floor(g / 3), id: `s${g}` })

  it("lists a parent's children through the parent index", async () => {
    const scans = (await plan({ parentSession: 's5000' })).filter((n) => n['Index Name'] !== undefined)
    expect(scans.map((n) => n['Index Name'])).toEqual(['dsh_sessions_parent'])
    expect(scans[0]!['Actual Rows']).toBe(99)
  })

  it('starts a page after a deep keyset position at that position in the created_at index', async () => {
    const page = await plan({ limit: 50, cursor: cursorAt({}, 15_001) })
    const scan = page.find((n) => n['Index Name'] !== undefined)
    expect(scan?.['Index Name']).toBe('dsh_sessions_created')
    expect(scan?.['Index Cond']).toMatch(/created_at >=/)
    // Only the rows of the cursor's own millisecond are read and dropped, not the 15,000 before it.
    expect(scan?.['Rows Removed by Filter'] ?? 0).toBeLessThanOrEqual(3)
  })

  it("starts a page of a parent's children at the keyset position in the parent index", async () => {
    const filter = { parentSession: 's5000', limit: 10 }
    const page = await plan({ ...filter, cursor: cursorAt(filter, 5050) })
    const scan = page.find((n) => n['Index Name'] !== undefined)
    expect(scan?.['Index Name']).toBe('dsh_sessions_parent')
    expect(scan?.['Index Cond']).toMatch(/parent_key = .*created_at >=/)
    expect(scan?.['Rows Removed by Filter'] ?? 0).toBeLessThanOrEqual(3)
  })
})
