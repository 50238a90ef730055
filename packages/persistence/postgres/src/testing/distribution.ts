import type pg from 'pg'

/** One way a table breaks the distribution rules. */
export interface DistributionViolation {
  readonly table: string
  readonly problem: string
}

/** Columns that make a table per-session: it names a session by its lifecycle or its key. */
const SESSION_COLUMNS = ['sid', 'id_key', 'session_key']
/** The distribution key's column names (both hold the SHA-256 of the session id). */
const KEY_COLUMNS = ['id_key', 'session_key']

interface TableRow {
  oid: number
  name: string
  columns: string[]
  keyAttnum: number | null
  keyName: string | null
  partstrat: string | null
  partattrs: number[] | null
  partitions: number
}

interface ConstraintRow {
  table_oid: number
  name: string
  contype: string
  conkey: number[]
  confrelid: number
  confkey: number[] | null
}

/**
 * Reads the catalog of `schema` (default: the connection's current schema)
 * and reports every per-session table (one with a `sid`, `id_key` or
 * `session_key` column) that breaks the rules a distributed PostgreSQL
 * (Citus) places on co-located distributed tables:
 *
 * - it carries the distribution key (`id_key`, or `session_key`);
 * - it is hash-partitioned (`PARTITION BY HASH`) on that key alone;
 * - every primary, unique and foreign key includes the key, and a foreign
 *   key maps it onto the referenced table's key (so both rows sit in the
 *   same-numbered partition);
 * - every per-session table has the same partition count.
 *
 * An empty list means the layout holds.
 */
export async function distributionViolations(pool: pg.Pool, schema?: string): Promise<DistributionViolation[]> {
  const { rows: tables } = await pool.query<TableRow>(
    `SELECT c.oid::int AS oid, c.relname AS name,
            array_agg(a.attname::text ORDER BY a.attnum) AS columns,
            min(a.attnum) FILTER (WHERE a.attname = ANY($2::text[]))::int AS "keyAttnum",
            min(a.attname) FILTER (WHERE a.attname = ANY($2::text[])) AS "keyName",
            p.partstrat::text AS partstrat, string_to_array(p.partattrs::text, ' ')::int[] AS partattrs,
            (SELECT count(*)::int FROM pg_inherits i WHERE i.inhparent = c.oid) AS partitions
     FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace
     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     LEFT JOIN pg_partitioned_table p ON p.partrelid = c.oid
     WHERE n.nspname = coalesce($1, current_schema()) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
     GROUP BY c.oid, c.relname, p.partstrat, p.partattrs
     HAVING bool_or(a.attname = ANY($3::text[]))
     ORDER BY c.relname`,
    [schema ?? null, KEY_COLUMNS, SESSION_COLUMNS],
  )
  const byOid = new Map(tables.map((t) => [t.oid, t]))
  const { rows: constraints } = await pool.query<ConstraintRow>(
    `SELECT conrelid::int AS table_oid, conname AS name, contype::text AS contype, conkey::int[] AS conkey,
            confrelid::int AS confrelid, confkey::int[] AS confkey
     FROM pg_constraint WHERE contype IN ('p', 'u', 'f') AND conparentid = 0 AND conrelid = ANY($1::oid[]) ORDER BY conname`,
    [tables.map((t) => t.oid)],
  )
  const violations: DistributionViolation[] = []
  const add = (table: string, problem: string) => violations.push({ table, problem })
  for (const t of tables) {
    if (t.keyAttnum === null) {
      add(
        t.name,
        `names sessions (${t.columns.filter((c) => SESSION_COLUMNS.includes(c)).join(', ')}) but carries no distribution key (id_key)`,
      )
      continue
    }
    if (t.partstrat !== 'h' || t.partattrs?.length !== 1 || t.partattrs[0] !== t.keyAttnum) {
      add(t.name, `is not hash-partitioned on its distribution key ${t.keyName} (PARTITION BY HASH (${t.keyName}))`)
    }
  }
  for (const c of constraints) {
    const t = byOid.get(c.table_oid)!
    if (t.keyAttnum === null) continue
    const kind = c.contype === 'p' ? 'primary key' : c.contype === 'u' ? 'unique key' : 'foreign key'
    const at = c.conkey.indexOf(t.keyAttnum)
    if (at < 0) {
      add(t.name, `${kind} ${c.name} does not include the distribution key ${t.keyName}`)
      continue
    }
    if (c.contype !== 'f') continue
    const target = byOid.get(c.confrelid)
    if (target === undefined || target.keyAttnum === null || c.confkey?.[at] !== target.keyAttnum) {
      add(
        t.name,
        `foreign key ${c.name} does not map ${t.keyName} onto the referenced table's distribution key (a reference across sessions)`,
      )
    }
  }
  const keyed = tables.filter((t) => t.partstrat === 'h' && t.keyAttnum !== null && t.partattrs?.[0] === t.keyAttnum)
  const counts = new Set(keyed.map((t) => t.partitions))
  if (counts.size > 1) {
    for (const t of keyed)
      add(t.name, `has ${t.partitions} partitions; the per-session tables do not share one count (${[...counts].join(', ')})`)
  }
  return violations
}
