// Measures the two ways to co-locate a subagent tree on the partitioned
// tables (docs/decisions/2026-12-05-postgres-partitioning.md):
//   own  — every session is distributed on its own id_key (the schema);
//   root — children are distributed on their root session's key, with an
//          id_key → root_key lookup table (distributed on id_key) so a write
//          or read by id can find its partition.
// For each: listChildren of a parent (the listing statement by parent_key)
// and one append (next_seq move + batch row), paired call by call, medians.
// Usage: node scripts/measure-colocation.mjs [roots=2000] [children=20] [partitions=16] [calls=2000]
import { performance } from 'node:perf_hooks'
import { startTestCluster } from '@dsh/session-persistence-postgres/testing'
import pg from 'pg'

const [roots = 2000, children = 20, partitions = 16, calls = 2000] = process.argv.slice(2).map(Number)
const cluster = await startTestCluster()
const pool = new pg.Pool({ connectionString: cluster.connectionString(), max: 1 })
const parts = (table) =>
  Array.from(
    { length: partitions },
    (_, i) => `CREATE TABLE ${table}_p${i} PARTITION OF ${table} FOR VALUES WITH (MODULUS ${partitions}, REMAINDER ${i})`,
  )
try {
  for (const [schema, key] of [
    ['own', 'id_key'],
    ['root', 'root_key'],
  ]) {
    const s = (sql) => pool.query(sql)
    await s(`CREATE SCHEMA ${schema}`)
    await s(`CREATE TABLE ${schema}.sessions (root_key bytea NOT NULL, id_key bytea NOT NULL, sid bigint GENERATED ALWAYS AS IDENTITY,
      id bytea NOT NULL, header text NOT NULL, created_at bigint NOT NULL, parent_key bytea, next_seq integer NOT NULL DEFAULT 0,
      PRIMARY KEY (${key === 'id_key' ? 'id_key' : 'root_key, id_key'}), UNIQUE (${key}, sid${key === 'id_key' ? '' : ', id_key'})) PARTITION BY HASH (${key})`)
    for (const p of parts(`${schema}.sessions`)) await s(p)
    await s(`CREATE INDEX ON ${schema}.sessions (parent_key, created_at) WHERE parent_key IS NOT NULL`)
    await s(`CREATE TABLE ${schema}.batches (root_key bytea NOT NULL, id_key bytea NOT NULL, sid bigint NOT NULL, first_seq integer NOT NULL,
      body bytea NOT NULL, PRIMARY KEY (${key === 'id_key' ? 'id_key' : 'root_key, id_key'}, sid, first_seq)) PARTITION BY HASH (${key})`)
    for (const p of parts(`${schema}.batches`)) await s(p)
    if (key === 'root_key') {
      await s(`CREATE TABLE ${schema}.session_root (id_key bytea PRIMARY KEY, root_key bytea NOT NULL) PARTITION BY HASH (id_key)`)
      for (const p of parts(`${schema}.session_root`)) await s(p)
    }
    await s(`INSERT INTO ${schema}.sessions (root_key, id_key, id, header, created_at, parent_key)
      SELECT sha256(convert_to('r' || r, 'UTF8')), sha256(convert_to(CASE WHEN c = 0 THEN 'r' || r ELSE 'r' || r || '.' || c END, 'UTF8')),
             convert_to(CASE WHEN c = 0 THEN 'r' || r ELSE 'r' || r || '.' || c END, 'UTF8'), repeat('h', 300), r * 100 + c,
             CASE WHEN c = 0 THEN NULL ELSE sha256(convert_to('r' || r, 'UTF8')) END
      FROM generate_series(1, ${roots}) r, generate_series(0, ${children}) c`)
    if (key === 'root_key') await s(`INSERT INTO ${schema}.session_root SELECT id_key, root_key FROM ${schema}.sessions`)
    await s(`ANALYZE ${schema}.sessions`)
  }
  const listOwn = { name: 'list_own', text: 'SELECT sid, header, next_seq FROM own.sessions WHERE parent_key = $1 ORDER BY created_at, id' }
  const listRoot = {
    name: 'list_root',
    text: `SELECT sid, header, next_seq FROM root.sessions WHERE root_key = (SELECT root_key FROM root.session_root WHERE id_key = $1)
           AND parent_key = $1 ORDER BY created_at, id`,
  }
  const appendOwn = {
    name: 'append_own',
    text: `WITH s AS (UPDATE own.sessions SET next_seq = next_seq + 1 WHERE id_key = $1 RETURNING id_key, sid, next_seq)
           INSERT INTO own.batches (root_key, id_key, sid, first_seq, body) SELECT $1, id_key, sid, next_seq - 1, $2 FROM s`,
  }
  const appendRoot = {
    name: 'append_root',
    text: `WITH r AS (SELECT root_key FROM root.session_root WHERE id_key = $1),
           s AS (UPDATE root.sessions SET next_seq = next_seq + 1 WHERE root_key = (SELECT root_key FROM r) AND id_key = $1 RETURNING root_key, id_key, sid, next_seq)
           INSERT INTO root.batches (root_key, id_key, sid, first_seq, body) SELECT root_key, id_key, sid, next_seq - 1, $2 FROM s`,
  }
  const { createHash } = await import('node:crypto')
  const key = (id) => createHash('sha256').update(id).digest()
  const body = Buffer.alloc(1024, 7)
  const samples = { list_own: [], list_root: [], append_own: [], append_root: [] }
  const time = async (q, values) => {
    const t = performance.now()
    const { rowCount } = await pool.query({ ...q, values })
    samples[q.name].push(performance.now() - t)
    return rowCount
  }
  for (let i = 0; i < calls; i++) {
    const r = 1 + ((i * 7919) % roots)
    const parent = key(`r${r}`)
    const child = key(`r${r}.${1 + (i % children)}`)
    const pair = i % 2 === 0 ? [listOwn, listRoot] : [listRoot, listOwn]
    for (const q of pair) if ((await time(q, [parent])) !== children) throw new Error(`${q.name} listed the wrong children`)
    const writes = i % 2 === 0 ? [appendOwn, appendRoot] : [appendRoot, appendOwn]
    for (const q of writes) if ((await time(q, [child, body])) !== 1) throw new Error(`${q.name} appended nothing`)
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  const p99 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]
  const plan = async (q, values) =>
    (await pool.query({ text: `EXPLAIN (COSTS OFF) ${q.text}`, values })).rows.map((r) => r['QUERY PLAN']).filter((l) => /Scan/.test(l))
      .length
  const result = {
    sessions: roots * (children + 1),
    partitions,
    calls,
    ms: Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, { median: +median(xs).toFixed(3), p99: +p99(xs).toFixed(3) }])),
    scansInPlan: {
      list_own: await plan(listOwn, [key('r1')]),
      list_root: await plan(listRoot, [key('r1')]),
    },
  }
  console.log(JSON.stringify(result, null, 2))
} finally {
  await pool.end()
  await cluster.stop()
}
