import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHost, migratePostgres, verifyPostgres } from '../src/index.js'

// createHost({ postgres }) against a real throwaway PostgreSQL cluster:
// persistence, cache and query over one pool, two hosts sharing a database.
let cluster: TestCluster

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
})

afterAll(async () => {
  await cluster?.stop()
})

describe('createHost({ postgres })', () => {
  it('composes the PostgreSQL backends; a second host on the same database sees the catalog cold; the location hides credentials', async () => {
    const url = await cluster.createDatabase()
    const first = await createHost({ postgres: { connectionString: url } })
    let parentId: string
    let childId: string
    try {
      expect(first.queryBackend).toBe('postgres')
      expect(first.cache).toBeDefined()
      expect(first.root).not.toContain('@')
      expect(first.paths).toBeUndefined()
      const parent = first.sessions.create({ cwd: '/work' })
      parent.append('user/message', { text: 'hello postgres' })
      const child = first.subagents.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'help' })
      await child.done
      await first.sessions.flush(parent)
      parentId = parent.id
      childId = child.id
    } finally {
      await first.dispose()
    }
    const second = await createHost({ postgres: { connectionString: url } })
    try {
      expect(await second.subagents.listChildren(parentId)).toEqual([
        { kind: 'child', id: childId, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'helper' },
      ])
      expect((await second.query.listSessions({ parentSession: parentId })).records.map((r) => r.header.id)).toEqual([childId])
    } finally {
      await second.dispose()
    }
  })

  it('passes coldReadConcurrency to the subagent runtime and fails on a value outside 1..64', async () => {
    const url = await cluster.createDatabase()
    const host = await createHost({ postgres: { connectionString: url }, coldReadConcurrency: 8 })
    try {
      expect(host.subagents.coldReadConcurrency).toBe(8)
      const parent = host.sessions.create()
      const children = await Promise.all(
        Array.from({ length: 12 }, (_, i) => host.subagents.spawn(parent, { mode: 'one-shot', label: `c${i}`, context: 'fresh' }).done),
      )
      expect(children).toHaveLength(12)
      const labels = (await host.subagents.listChildren(parent.id)).map((r) => (r.kind === 'child' ? r.label : r.reason))
      expect(labels.sort()).toEqual(Array.from({ length: 12 }, (_, i) => `c${i}`).sort())
    } finally {
      await host.dispose()
    }
    const error = await createHost({ postgres: { connectionString: url }, coldReadConcurrency: 0 }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toMatchObject({ code: 'SUBAGENT_INVALID_OPTIONS' })
  })

  it('a pool the caller gives is shared and left open; query: memory and projectionCache: false still apply', async () => {
    const pool = new pg.Pool({ connectionString: await cluster.createDatabase() })
    try {
      const host = await createHost({ postgres: { pool }, query: 'memory', projectionCache: false })
      expect(host.queryBackend).toBe('memory')
      expect(host.cache).toBeUndefined()
      const session = host.sessions.create({ id: 'pooled' })
      session.append('user/message', { text: 'hi' })
      await host.sessions.flush(session)
      await host.dispose()
      const { rows } = await pool.query('select count(*)::int as n from dsh_sessions')
      expect(rows[0].n).toBe(1)
    } finally {
      await pool.end()
    }
  })

  it('read-only: no migration (an empty database is refused and left empty), reads work, verify reports every session', async () => {
    const empty = await cluster.createDatabase()
    await expect(createHost({ postgres: { connectionString: empty }, readOnly: true })).rejects.toThrow()
    await expect(verifyPostgres({ connectionString: empty })).rejects.toThrow()
    const pool = new pg.Pool({ connectionString: empty })
    try {
      const { rows } = await pool.query("select count(*)::int as n from information_schema.tables where table_schema = 'public'")
      expect(rows[0].n).toBe(0)
    } finally {
      await pool.end()
    }
    const url = await cluster.createDatabase()
    const writer = await createHost({ postgres: { connectionString: url } })
    const session = writer.sessions.create({ id: 'kept' })
    session.append('user/message', { text: 'hello' })
    await writer.sessions.flush(session)
    await writer.dispose()
    const reader = await createHost({ postgres: { connectionString: url }, readOnly: true })
    try {
      expect(reader.readOnly).toBe(true)
      expect((await reader.query.listSessions({})).records.map((r) => r.header.id)).toEqual(['kept'])
      await expect(reader.persistence.delete(session.id)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_READ_ONLY' })
      expect((await reader.persistence.list()).map((r) => r.header.id)).toEqual(['kept'])
    } finally {
      await reader.dispose()
    }
    const report = await verifyPostgres({ connectionString: url })
    expect(report.logs).toEqual([{ id: 'kept', status: 'ok', events: 1, tornBytes: 0 }])
    expect(report.root).not.toContain('@')
  })

  it('refuses options that describe a JSONL root, and both or neither of connectionString and pool', async () => {
    for (const options of [
      { postgres: { connectionString: 'postgres://x/y' }, root: '/tmp/x' },
      { postgres: { connectionString: 'postgres://x/y' }, compression: 'none' as const },
      { postgres: {} },
    ]) {
      await expect(createHost(options)).rejects.toMatchObject({ code: 'HOST_INVALID_OPTIONS' })
    }
  })
})

describe('migratePostgres', () => {
  it('migrates the three backends once (sessions first), reports from → to, and leaves a read-only host able to open', async () => {
    const url = await cluster.createDatabase()
    const first = await migratePostgres({ connectionString: url })
    expect(first.location).not.toContain('@')
    expect(first.components.map((c) => c.component)).toEqual(['sessions', 'search', 'projection-cache'])
    expect(first.components.every((c) => c.from === 0 && c.to > 0)).toBe(true)
    const second = await migratePostgres({ connectionString: url })
    expect(second.components).toEqual(first.components.map((c) => ({ ...c, from: c.to })))
    const reader = await createHost({ postgres: { connectionString: url }, readOnly: true })
    try {
      expect(reader.cache).toBeDefined()
      expect((await reader.query.listSessions({})).records).toEqual([])
    } finally {
      await reader.dispose()
    }
  })

  it('refuses a newer schema typed and changes nothing; a pool the caller gives stays open', async () => {
    const pool = new pg.Pool({ connectionString: await cluster.createDatabase() })
    try {
      await migratePostgres({ pool })
      await pool.query("UPDATE dsh_schema_version SET version = version + 1 WHERE component = 'search'")
      const before = (await pool.query('SELECT component, version FROM dsh_schema_version ORDER BY 1')).rows
      await expect(migratePostgres({ pool })).rejects.toMatchObject({ code: 'POSTGRES_PERSISTENCE_SCHEMA_TOO_NEW' })
      expect((await pool.query('SELECT component, version FROM dsh_schema_version ORDER BY 1')).rows).toEqual(before)
    } finally {
      await pool.end()
    }
  })
})
