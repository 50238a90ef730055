import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import { encodeListCursor, indexFetchLimit, parseListFilter } from '@dsh/session-query/backend'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { listingStatement } from '../src/listing.js'

// The plans of the listing statement over 20,000 session rows: 200 parents
// of 99 children each, three sessions per millisecond. Verdicts are on the
// plan's shape and its row counts (EXPLAIN ANALYZE), never on its times.
// dsh_sessions is hash-partitioned on id_key: a listing by parent, cwd or
// creation time names no id, so it reads every partition, each through the
// partition's copy of the index (one index scan per partition, no seq scan).
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
  /** A partition's index → the partitioned index it is attached to. */
  let attachedTo = new Map<string, string>()
  let partitions = 0

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
    const { rows } = await db.pool.query<{ child: string; parent: string }>(
      `SELECT c.relname AS child, p.relname AS parent FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent WHERE c.relkind = 'i'`,
    )
    attachedTo = new Map(rows.map((r) => [r.child, r.parent]))
    partitions = (await db.pool.query<{ n: number }>('SELECT partitions AS n FROM dsh_layout')).rows[0]!.n
  })

  /** The index scans of a plan, named by the partitioned index each partition's index belongs to; none may be a seq scan. */
  function indexScans(plan: PlanNode[]): { index: string | undefined; node: PlanNode }[] {
    expect(plan.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([])
    return plan.filter((n) => n['Index Name'] !== undefined).map((node) => ({ index: attachedTo.get(node['Index Name']!), node }))
  }
  const removed = (scans: { node: PlanNode }[]) => scans.reduce((sum, s) => sum + (s.node['Rows Removed by Filter'] ?? 0), 0)

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
    const scans = indexScans(await plan({ parentSession: 's5000' }))
    expect(scans.map((s) => s.index)).toEqual(Array(partitions).fill('dsh_sessions_parent'))
    expect(scans.reduce((sum, s) => sum + (s.node['Actual Rows'] ?? 0), 0)).toBe(99)
    expect(removed(scans)).toBe(0)
  })

  it('lists the children of several parents (parentSessions) through the parent index, reading their rows only', async () => {
    const scans = indexScans(await plan({ parentSessions: ['s5000', 's7000', 's9000'], origin: 'subagent' }))
    expect(new Set(scans.map((s) => s.index))).toEqual(new Set(['dsh_sessions_parent']))
    expect(scans.reduce((sum, s) => sum + (s.node['Actual Rows'] ?? 0), 0)).toBe(3 * 99)
    expect(removed(scans)).toBe(0)
  })

  it('looks sessions up by id (ids) through a key on id_key, reading their rows only', async () => {
    const scans = indexScans(await plan({ ids: ['s5', 's12345', 's19999', 'nobody'] }))
    expect(scans.length).toBeGreaterThan(0)
    // The primary key (id_key) and the unique (id_key, sid) both lead with id_key; the planner may take either.
    for (const { index, node } of scans) {
      expect(['dsh_sessions_pkey', 'dsh_sessions_id_key_sid_key']).toContain(index)
      expect(node['Index Cond']).toMatch(/id_key = ANY/)
    }
    expect(scans.reduce((sum, s) => sum + (s.node['Actual Rows'] ?? 0), 0)).toBe(3)
    expect(removed(scans)).toBe(0)
  })

  it('starts a page after a deep keyset position at that position in the created_at index', async () => {
    const scans = indexScans(await plan({ limit: 50, cursor: cursorAt({}, 15_001) }))
    expect(new Set(scans.map((s) => s.index))).toEqual(new Set(['dsh_sessions_created']))
    for (const { node } of scans) expect(node['Index Cond']).toMatch(/created_at >=/)
    // Only the rows of the cursor's own millisecond are read and dropped (in whichever partitions they sit), not the 15,000 before it.
    expect(removed(scans)).toBeLessThanOrEqual(3)
  })

  it("starts a page of a parent's children at the keyset position in the parent index", async () => {
    const filter = { parentSession: 's5000', limit: 10 }
    const scans = indexScans(await plan({ ...filter, cursor: cursorAt(filter, 5050) }))
    expect(new Set(scans.map((s) => s.index))).toEqual(new Set(['dsh_sessions_parent']))
    for (const { node } of scans) expect(node['Index Cond']).toMatch(/parent_key = .*created_at >=/)
    expect(removed(scans)).toBeLessThanOrEqual(3)
  })
})
