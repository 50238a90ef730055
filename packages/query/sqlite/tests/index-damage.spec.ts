import {
  closeSync,
  copyFileSync,
  existsSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { createMemoryPersistence, type SessionPersistence } from '@dsh/session-persistence'
import type { SessionListFilter } from '@dsh/session-query'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import type { SqliteSessionQuery } from '../src/index.js'
import { header, message, openQuery, persist, store, tempDir } from './helpers.js'
import { countReads } from './read-counter.js'

const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot']

async function corpus(): Promise<SessionPersistence> {
  const { persistence } = countReads(createMemoryPersistence())
  for (let i = 0; i < 60; i++) {
    const parent = i % 10 === 0 ? {} : { parentSession: `p${i - (i % 10)}`, origin: 'subagent', delegationDepth: 1 }
    const events = Array.from({ length: 1 + (i % 4) }, (_, k) =>
      message(
        k,
        `${WORDS[(i + k) % WORDS.length]} ${WORDS[(i * 7 + k) % WORDS.length]} note ${i}`,
        k % 2 === 0 ? 'user/message' : 'assistant/message',
      ),
    )
    await persist(
      persistence,
      header(i % 10 === 0 ? `p${i}` : `c${i}`, 1000 + (i % 17), { ...parent, ...(i % 3 === 0 ? { cwd: '/a' } : {}) }),
      events,
    )
  }
  return persistence
}

/** Every answer the index shapes: listings (all pages) and searches (all pages). */
async function answers(query: SqliteSessionQuery): Promise<unknown> {
  const filters: SessionListFilter[] = [
    {},
    { parentSession: 'p10' },
    { origin: 'subagent' },
    { cwd: '/a' },
    { createdAt: { from: 1003, to: 1009 } },
  ]
  const lists: unknown[] = []
  for (const filter of filters) {
    const records: unknown[] = []
    let cursor: string | undefined
    do {
      const page = await query.listSessions({ ...filter, limit: 7, ...(cursor === undefined ? {} : { cursor }) })
      records.push(...page.records)
      cursor = page.nextCursor
    } while (cursor !== undefined)
    lists.push(records)
  }
  const searches: unknown[] = []
  for (const text of ['alpha', 'bravo note', 'echo 17']) {
    for (const kind of ['searchSessions', 'searchEvents'] as const) {
      const hits: unknown[] = []
      let cursor: string | undefined
      do {
        const page: { hits: readonly unknown[]; nextCursor?: string } = await query[kind]({
          text,
          limit: 4,
          ...(cursor === undefined ? {} : { cursor }),
        })
        hits.push(...page.hits)
        cursor = page.nextCursor
      } while (cursor !== undefined)
      searches.push(hits)
    }
  }
  return { lists, searches }
}

function zero(path: string, offset: number, length: number): void {
  const fd = openSync(path, 'r+')
  writeSync(fd, Buffer.alloc(length), 0, length, offset)
  closeSync(fd)
}

const damages: Array<[name: string, expected: string, damage: (path: string) => void]> = [
  ['deleted', 'missing', (path) => rmSync(path)],
  [
    'deleted, with a stale WAL left beside it',
    'missing',
    (path) => {
      // A crash can leave the WAL of the deleted file behind: it must not be replayed into the new one
      // (a new generation has a name of its own, so its WAL is its own).
      const file = generationOf(path)
      withDb(file, (db) => {
        db.pragma('journal_mode = WAL')
        db.pragma('wal_autocheckpoint = 0')
        db.exec("UPDATE sessions SET header = header || ' '; UPDATE meta SET value = value || '-old'")
        copyFileSync(`${file}-wal`, `${file}.saved-wal`)
      })
      rmSync(file)
      renameSync(`${file}.saved-wal`, `${file}-wal`)
    },
  ],
  ['truncated to half', 'corrupt', (path) => truncateSync(path, Math.floor(statSync(path).size / 2))],
  ['header zeroed', 'corrupt', (path) => zero(path, 0, 100)],
  // The file header (identity, version) still reads; the schema page behind it does not.
  ['its schema page zeroed behind the file header', 'corrupt', (path) => zero(path, 100, 4096 - 100)],
  [
    'replaced by junk',
    'corrupt',
    (path) => writeFileSync(path, Buffer.from(Array.from({ length: statSync(path).size }, (_, i) => (i * 131 + 7) % 256))),
  ],
  ['a middle page zeroed', 'corrupt', (path) => zero(path, 4096 * Math.floor(statSync(path).size / 4096 / 2), 4096)],
  ['of an older schema', 'schema', (path) => withDb(path, (db) => db.pragma('user_version = 0'))],
  [
    'another application’s database',
    'corrupt',
    (path) => {
      rmSync(path)
      withDb(path, (db) => db.exec('CREATE TABLE sessions (id TEXT); INSERT INTO sessions VALUES (1)'))
    },
  ],
  // Content damage SQLite's structural checks cannot see: caught by the row checksum when read.
  [
    'a row rewritten behind the index’s back',
    'corrupt',
    (path) =>
      withDb(path, (db) =>
        db
          .prepare(
            `UPDATE sessions SET header = replace(header, '"createdAt":1005', '"createdAt":1006') WHERE header LIKE '%"createdAt":1005%'`,
          )
          .run(),
      ),
  ],
]

/** The generation file the index path links to. */
function generationOf(path: string): string {
  return join(dirname(path), readlinkSync(path))
}

function withDb(path: string, fn: (db: Database.Database) => unknown): void {
  const db = new Database(path)
  try {
    fn(db)
  } finally {
    db.close()
  }
}

describe('the index is derived data', () => {
  it.each(damages)('an index file %s between runs changes no query result, only cost (rebuild: %s)', async (_name, expected, damage) => {
    const { persistence, reads: counted } = countReads(await corpus())
    const dir = tempDir()
    const path = join(dir, '.index', 'query.sqlite')
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    const before = await answers(first.query)
    await first.query.close()
    // Closed at rest: no WAL companions, so a reader opens it on a read-only file system too.
    expect(existsSync(`${generationOf(path)}-wal`)).toBe(false)
    expect(existsSync(`${generationOf(path)}-shm`)).toBe(false)
    const pristine = readFileSync(path)
    // Sanity: an undamaged reopen reads no body and gives the same answers.
    const reads = counted.logs
    const clean = await openQuery({ sessions: store().sessions, persistence, path })
    expect(counted.logs).toBe(reads)
    expect(await answers(clean.query)).toEqual(before)
    await clean.query.close()

    writeFileSync(path, pristine)
    damage(path)
    const damaged = await openQuery({ sessions: store().sessions, persistence, path })
    expect(await answers(damaged.query)).toEqual(before)
    // The cost: the index was rebuilt, reading every log once.
    expect(damaged.progress.some((p) => p.rebuild === expected)).toBe(true)
    expect(counted.logs - reads).toBe(60)
    // And the rebuilt file serves the next run without any body read.
    await damaged.query.close()
    const next = await openQuery({ sessions: store().sessions, persistence, path })
    const settled = counted.logs
    expect(await answers(next.query)).toEqual(before)
    expect(counted.logs).toBe(settled)
    expect(next.progress.every((p) => p.rebuild === undefined)).toBe(true)
  })

  it('queries that meet the same damage while its rebuild is on its way start no second rebuild: every log is read once', async () => {
    const { persistence: counting, reads: counted } = countReads(await corpus())
    // Body reads wait at a gate, so the rebuild the first query starts is still on its way when the second meets the damage.
    let open = false
    const held: Array<() => void> = []
    const gate = () => (open ? Promise.resolve() : new Promise<void>((resolve) => held.push(resolve)))
    const persistence = new Proxy(counting, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown
        if (typeof value !== 'function') return value
        if (property === 'inspect' || property === 'inspectFrom')
          return async (...args: unknown[]) => {
            await gate()
            return (value as (...a: unknown[]) => unknown).apply(target, args)
          }
        return (value as (...a: unknown[]) => unknown).bind(target)
      },
    })
    const path = join(tempDir(), '.index', 'query.sqlite')
    open = true
    const first = await openQuery({ sessions: store().sessions, persistence, path })
    await first.query.close()
    withDb(path, (db) =>
      db
        .prepare(
          `UPDATE sessions SET header = replace(header, '"createdAt":1005', '"createdAt":1006') WHERE header LIKE '%"createdAt":1005%'`,
        )
        .run(),
    )
    open = false
    const reads = counted.logs
    const damaged = await openQuery({ sessions: store().sessions, persistence, path })
    // Each listing meets the damaged row and answers from the logs' headers.
    expect((await damaged.query.listSessions({})).records.length).toBe(60)
    expect((await damaged.query.listSessions({ cwd: '/a' })).records.length).toBe(20)
    open = true
    for (const release of held.splice(0)) release()
    // A pass queued behind every rebuild asked so far: once it settles, they all have.
    await damaged.query.reconcile()
    expect(damaged.progress.filter((p) => p.phase === 'scan' && p.done === 0 && p.rebuild === 'corrupt')).toHaveLength(1)
    expect(counted.logs - reads).toBe(60)
  })

  it('rebuild() starts over on request and reports its progress', async () => {
    const persistence = await corpus()
    const { query, progress } = await openQuery({ sessions: store().sessions, persistence, path: join(tempDir(), 'q.sqlite') })
    const before = await answers(query)
    progress.length = 0
    const report = await query.rebuild()
    expect(report).toMatchObject({ rebuild: 'requested', listed: 60, read: 60 })
    expect(progress[0]).toEqual({ phase: 'scan', done: 0, total: 0, rebuild: 'requested' })
    expect(progress).toContainEqual({ phase: 'scan', done: 60, total: 60, rebuild: 'requested' })
    const indexing = progress.filter((p) => p.phase === 'index')
    expect(indexing[0]).toEqual({ phase: 'index', done: 0, total: 60, rebuild: 'requested' })
    expect(indexing.at(-1)).toEqual({ phase: 'index', done: 60, total: 60, rebuild: 'requested' })
    for (let i = 1; i < indexing.length; i++) expect(indexing[i]!.done).toBeGreaterThanOrEqual(indexing[i - 1]!.done)
    expect(await answers(query)).toEqual(before)
  })
})
