import { createHost } from '@dsh/host'
import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cli } from './support/run.js'

// `--store postgres://…` / DSH_STORE: the read commands over a real
// throwaway PostgreSQL cluster (no root at all), escaping included.
let cluster: TestCluster
let url: string
const HOSTILE = 'pg\x1b[2J\nrow\u202e'

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
  url = await cluster.createDatabase()
  const host = await createHost({ postgres: { connectionString: url } })
  try {
    const parent = host.sessions.create({ id: HOSTILE, cwd: '/work' })
    parent.append('user/message', { text: 'stored in postgres' })
    const child = host.subagents.spawn(parent, { id: 'pg-child', mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'go' })
    await child.done
    await host.sessions.flush(parent)
  } finally {
    await host.dispose()
  }
})

afterAll(async () => {
  await cluster?.stop()
})

describe('--store', () => {
  it('sessions, show and agents read a PostgreSQL store; text output stays escaped, --json exact', async () => {
    const listed = await cli(['sessions', '--store', url, '--json'])
    expect(listed.code, listed.stdout + listed.stderr).toBe(0)
    expect((JSON.parse(listed.stdout) as { sessions: { header: { id: string } }[] }).sessions.map((r) => r.header.id).sort()).toEqual(
      [HOSTILE, 'pg-child'].sort(),
    )
    const text = await cli(['sessions', '--store', url])
    expect(text.stdout).toContain('pg\\x1b[2J\\x0arow\\u202e')
    const shown = await cli(['show', 'pg-child'], { DSH_STORE: url })
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/^session pg-child/)
    const agents = JSON.parse((await cli(['agents', HOSTILE, '--store', url, '--json'])).stdout) as {
      rows: { id: string; label: string }[]
    }
    expect(agents.rows).toEqual([expect.objectContaining({ id: 'pg-child', label: 'helper' })])
  })

  it('verify checks every session of the store read-only; text escapes the hostile id', async () => {
    const json = await cli(['verify', '--store', url, '--json'])
    expect(json.code, json.stdout + json.stderr).toBe(0)
    const report = JSON.parse(json.stdout)
    expect(report).toMatchObject({ checked: 2, ok: 2, corrupt: 0 })
    expect(report.derived).toBeUndefined()
    expect(report.root).toMatch(/^postgres/)
    const text = await cli(['verify'], { DSH_STORE: url })
    expect(text.stdout).toContain('pg\\x1b[2J\\x0arow\\u202e')
    expect(text.stdout).toContain('All 2 logs verified')
  })

  it('a read command never migrates: an empty database is refused and left empty', async () => {
    const empty = await cluster.createDatabase()
    const result = await cli(['sessions', '--store', empty, '--json'])
    expect(result.code).toBe(1)
    const pool = new pg.Pool({ connectionString: empty })
    try {
      const { rows } = await pool.query("select count(*)::int as n from information_schema.tables where table_schema = 'public'")
      expect(rows[0].n).toBe(0)
    } finally {
      await pool.end()
    }
  })

  it('is refused where it cannot apply, with a root, or when it is not a postgres URL; a password on the command line warns', async () => {
    for (const args of [
      ['reindex', '--store', url],
      ['import', '.', '--from', 'dsh-v0', '--store', url],
      ['sessions', '--store', url, '--root', '/tmp'],
      ['sessions', '--store', 'mysql://x/y'],
      ['sessions', '--store', 'not a url'],
    ]) {
      const result = await cli([...args, '--json'])
      expect(result.code, args.join(' ')).toBe(2)
      expect(JSON.parse(result.stdout).error.code).toBe('CLI_USAGE')
    }
    const withPassword = new URL(url)
    withPassword.password = 'secret'
    const warned = await cli(['sessions', '--store', withPassword.toString(), '--json'])
    expect(warned.stderr).toMatch(/warning: the --store URL holds a password/)
    // DSH_STORE is ignored by commands that work on a local root only, and an explicit --root wins over it.
    expect((await cli(['demo', '--help'], { DSH_STORE: url })).code).toBe(0)
    const local = await cli(['sessions', '--root', '/nonexistent-dsh-root', '--json'], { DSH_STORE: url })
    expect(JSON.parse(local.stdout).error.code).toBe('CLI_ROOT_INVALID')
    const localToo = await cli(['sessions', '--root', '/nonexistent-dsh-root', '--json'], { DSH_DATABASE_URL: url })
    expect(JSON.parse(localToo.stdout).error.code).toBe('CLI_ROOT_INVALID')
  })

  it('DSH_DATABASE_URL names the store like DSH_STORE; the two naming different stores is a usage error', async () => {
    const listed = await cli(['sessions', '--json'], { DSH_DATABASE_URL: url })
    expect(listed.code, listed.stdout + listed.stderr).toBe(0)
    expect((JSON.parse(listed.stdout) as { sessions: unknown[] }).sessions).toHaveLength(2)
    expect((await cli(['sessions', '--json'], { DSH_DATABASE_URL: url, DSH_STORE: url })).code).toBe(0)
    const other = new URL(url)
    other.pathname = '/another'
    const both = await cli(['sessions', '--json'], { DSH_DATABASE_URL: url, DSH_STORE: other.toString() })
    expect(both.code).toBe(2)
    expect(JSON.parse(both.stdout).error.code).toBe('CLI_USAGE')
    // The flag wins over the environment.
    expect((await cli(['sessions', '--store', url, '--json'], { DSH_DATABASE_URL: other.toString() })).code).toBe(0)
  })
})

describe('dsh migrate', () => {
  const tables = async (database: string): Promise<string[]> => {
    const pool = new pg.Pool({ connectionString: database })
    try {
      const { rows } = await pool.query<{ name: string }>(
        "select table_name as name from information_schema.tables where table_schema = 'public' order by 1",
      )
      return rows.map((r) => r.name)
    } finally {
      await pool.end()
    }
  }

  it("creates the three backends' schemas on an empty database, says what it did, and a second run changes nothing", async () => {
    const empty = await cluster.createDatabase()
    const first = await cli(['migrate', '--store', empty, '--json'])
    expect(first.code, first.stdout + first.stderr).toBe(0)
    const report = JSON.parse(first.stdout) as { store: string; components: { component: string; from: number; to: number }[] }
    expect(report.components.map((c) => c.component)).toEqual(['sessions', 'search', 'projection-cache'])
    expect(
      report.components.every((c) => c.from === 0 && c.to > 0),
      first.stdout,
    ).toBe(true)
    expect(report.store).not.toContain('@')
    const after = await tables(empty)
    expect(after).toEqual(expect.arrayContaining(['dsh_sessions', 'dsh_batches', 'dsh_event_text', 'dsh_projection_checkpoints']))
    // Idempotent (here through DSH_DATABASE_URL, in text).
    const again = await cli(['migrate'], { DSH_DATABASE_URL: empty })
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toMatch(/^sessions: at version \d+ \(up to date\)$/m)
    expect(again.stdout).toContain('Nothing to do:')
    expect(await tables(empty)).toEqual(after)
    // A migrated database serves the read commands (which never migrate).
    const listed = await cli(['sessions', '--store', empty, '--json'])
    expect(listed.code, listed.stdout).toBe(0)
    expect(JSON.parse(listed.stdout).sessions).toEqual([])
  })

  it('refuses a database with a newer schema (typed, exit 1) and leaves it at its version', async () => {
    const database = await cluster.createDatabase()
    expect((await cli(['migrate', '--store', database])).code).toBe(0)
    const pool = new pg.Pool({ connectionString: database })
    try {
      await pool.query("update dsh_schema_version set version = version + 5 where component = 'sessions'")
      const { rows: before } = await pool.query('select component, version from dsh_schema_version order by 1')
      const refused = await cli(['migrate', '--store', database, '--json'])
      expect(refused.code).toBe(1)
      const { error } = JSON.parse(refused.stdout) as { error: { code: string; message: string } }
      expect(error.code).toBe('POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW')
      expect(error.message).toMatch(/Upgrade dsh/)
      const text = await cli(['migrate', '--store', database])
      expect(text.stderr).toMatch(/newer than .*\(POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW\)/)
      const { rows: after } = await pool.query('select component, version from dsh_schema_version order by 1')
      expect(after).toEqual(before)
    } finally {
      await pool.end()
    }
  })

  it('--partitions N chooses the hash partition count of every per-session table once; another count later is refused', async () => {
    const database = await cluster.createDatabase()
    const first = await cli(['migrate', '--store', database, '--partitions', '4'])
    expect(first.code, first.stdout + first.stderr).toBe(0)
    const pool = new pg.Pool({ connectionString: database })
    try {
      const { rows } = await pool.query<{ name: string; n: number }>(
        `select p.relname as name, count(i.inhrelid)::int as n from pg_partitioned_table t join pg_class p on p.oid = t.partrelid
         left join pg_inherits i on i.inhparent = p.oid group by p.relname order by 1`,
      )
      expect(rows).toEqual(
        [
          'dsh_attachments',
          'dsh_batches',
          'dsh_changes',
          'dsh_event_text',
          'dsh_projection_checkpoints',
          'dsh_search_progress',
          'dsh_sessions',
        ].map((name) => ({
          name,
          n: 4,
        })),
      )
      expect((await cli(['migrate', '--store', database])).code).toBe(0)
      const refused = await cli(['migrate', '--store', database, '--partitions', '8', '--json'])
      expect(refused.code).toBe(1)
      expect(JSON.parse(refused.stdout).error).toMatchObject({
        code: 'POSTGRES_PERSISTENCE_MIGRATION_FAILED',
        message: expect.stringContaining('split into 4 partitions'),
      })
      const bad = await cli(['migrate', '--store', database, '--partitions', 'many', '--json'])
      expect(bad.code).toBe(2)
      expect(JSON.parse(bad.stdout).error).toMatchObject({ code: 'CLI_USAGE' })
    } finally {
      await pool.end()
    }
  })

  it('needs a store: without --store or the environment it is a usage error', async () => {
    const result = await cli(['migrate', '--json'])
    expect(result.code).toBe(2)
    expect(JSON.parse(result.stdout).error).toMatchObject({ code: 'CLI_USAGE', message: expect.stringMatching(/DSH_DATABASE_URL/) })
  })
})
