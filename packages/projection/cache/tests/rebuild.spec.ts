import { copyFileSync, existsSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type SessionHeader, SessionLogOffset, type StoredSessionEvent } from '@dsh/session'
import type { ProjectionSnapshot } from '@dsh/session-projection'
import { tempDir } from '@dsh/test-kit'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CACHE_SCHEMA_VERSION, SqliteProjectionCache } from '../src/index.js'
import { host, turn } from './helpers.js'

const KEYS = ['messages', 'turns'] as const

interface Recorded {
  readonly header: SessionHeader
  readonly cut: number
  readonly events: readonly StoredSessionEvent[]
}

const { dir, cleanup } = tempDir('dsh-cache-')
const pristine = join(dir, 'pristine.sqlite')
const recorded: Recorded[] = []

/** Run 1: a corpus of parents and forked children, written to the cache as they go cold. */
beforeAll(async () => {
  const run = await host({ path: pristine, throttle: { events: Infinity, ms: Infinity } })
  for (let p = 0; p < 12; p++) {
    const parent = run.sessions.create()
    for (let t = 1; t <= 3; t++) turn(parent, t, `parent ${p} turn ${t} ${'x'.repeat(300)}`)
    const child = run.sessions.fork(parent, { origin: 'subagent', delegationDepth: 1 })
    turn(child, 9, `child of ${p}`)
    for (const session of [parent, child]) {
      recorded.push({ header: session.header, cut: session.inheritedEventCount, events: session.events })
      await run.sessions.dispose(session.id)
    }
  }
  await run.ctx.dispose()
  // Closed cleanly: the file alone is the cache (nothing left in a WAL).
  expect(existsSync(`${pristine}-wal`)).toBe(false)
  const db = new Database(pristine)
  expect(db.prepare('SELECT count(DISTINCT session_id) FROM checkpoint_rows').pluck().get()).toBe(24)
  db.close()
})
afterAll(cleanup)

/** Run 2 over a (possibly damaged) copy: the rung-2/rung-3 ladder a cold reader uses. */
async function readAll(path: string): Promise<{ values: ProjectionSnapshot[]; hits: number; rebuilds: number; warnings: string[] }> {
  const run = await host({ path, throttle: { events: Infinity, ms: Infinity } })
  try {
    const values = recorded.map(({ header, cut, events }) => {
      let cached: ProjectionSnapshot | undefined
      try {
        cached = run.cache.cachedSnapshot(header, SessionLogOffset(cut), KEYS)
      } catch {
        cached = undefined // a poisoned row is a miss
      }
      return cached ?? run.projections.fold(events, { inheritedEventCount: SessionLogOffset(cut) }, KEYS)
    })
    // The rebuilt cache works again: a new session is written and read back.
    const fresh = run.sessions.create({ id: `fresh-${path}` })
    turn(fresh, 1, 'after the damage')
    await run.cache.idle()
    expect(run.cache.cachedSnapshot(fresh.header, fresh.inheritedEventCount, KEYS)).toEqual({
      messages: { n: 1, last: 'after the damage' },
      turns: 1,
    })
    return { values, hits: run.cache.metrics.hits - 1, rebuilds: run.cache.metrics.rebuilds, warnings: run.warnings.map((w) => w.message) }
  } finally {
    await run.ctx.dispose()
  }
}

function reference(): ProjectionSnapshot[] {
  return recorded.map(({ events }) => ({
    messages: {
      n: events.filter((e) => e.type === 'user/message').length,
      last: (events.filter((e) => e.type === 'user/message').at(-1)?.data as { text: string } | undefined)?.text ?? null,
    },
    turns: events.filter((e) => e.type === 'turn/end').length,
  }))
}

let copies = 0
function damagedCopy(damage: (path: string) => void): string {
  const path = join(dir, `copy-${++copies}.sqlite`)
  copyFileSync(pristine, path)
  damage(path)
  return path
}

describe('a damaged cache file changes no value, only whether the cache hits', () => {
  it('intact: every session hits', async () => {
    const result = await readAll(damagedCopy(() => {}))
    expect(result.values).toEqual(reference())
    expect(result.hits).toBe(recorded.length)
    expect(result.rebuilds).toBe(0)
  })

  it.each([
    ['deleted', (p: string) => rmSync(p)],
    // SQLite reads a file shorter than its header as a new, empty database.
    ['truncated to 1 byte', (p: string) => truncateSync(p, 1)],
  ])('%s: every session misses and folds; the file is recreated', async (_what, damage) => {
    const path = damagedCopy(damage)
    const result = await readAll(path)
    expect(result.values).toEqual(reference())
    expect(result.hits).toBe(0)
    expect(result.rebuilds).toBe(0)
    expect(existsSync(path)).toBe(true)
  })

  it.each([
    ['filled with garbage', (p: string) => writeFileSync(p, Buffer.alloc(statSync(p).size, 0x5a))],
    [
      'garbage over its header',
      (p: string) => {
        const bytes = readFileSync(p)
        bytes.fill(0xa5, 0, 100)
        writeFileSync(p, bytes)
      },
    ],
    ['truncated mid-page', (p: string) => truncateSync(p, Math.floor(statSync(p).size / 2) + 123)],
    ['truncated at a page boundary', (p: string) => truncateSync(p, 4096 * 2)],
    [
      'of another schema version',
      (p: string) => {
        const db = new Database(p)
        db.pragma(`user_version = ${CACHE_SCHEMA_VERSION + 1}`)
        db.close()
      },
    ],
    [
      "another application's database",
      (p: string) => {
        rmSync(p)
        const db = new Database(p)
        db.exec('CREATE TABLE notes (body TEXT)')
        db.close()
      },
    ],
  ])('%s: rebuilt empty, every value unchanged', async (_what, damage) => {
    const result = await readAll(damagedCopy(damage))
    expect(result.values).toEqual(reference())
    expect(result.rebuilds).toBe(1)
    expect(result.hits).toBe(0)
    expect(result.warnings.some((w) => /unusable .*rebuilding it empty/.test(w))).toBe(true)
  })

  it('quick_check runs only when asked (dsh verify): checkDatabase() finds what an ordinary open does not look for', async () => {
    const intact = await host({ path: damagedCopy(() => {}) })
    try {
      expect(intact.cache.checkDatabase?.()).toBe('ok')
    } finally {
      await intact.ctx.dispose()
    }
    // A page of the row tree zeroed past the header: the open checks identity and version only.
    const path = damagedCopy((p) => {
      const bytes = readFileSync(p)
      bytes.fill(0, 4096 * 2, 4096 * 3)
      writeFileSync(p, bytes)
    })
    const run = await host({ path })
    try {
      expect(run.cache.metrics.rebuilds).toBe(0)
      const problem = run.cache.checkDatabase?.()
      expect(problem).not.toBe('ok')
      expect(run.cache.metrics.rebuilds).toBe(1)
      expect(run.cache.checkDatabase?.()).toBe('ok')
    } finally {
      await run.ctx.dispose()
    }
  })

  it('a byte flipped inside a row: the row reads as poisoned or missing, every value unchanged', async () => {
    const path = damagedCopy((p) => {
      const bytes = readFileSync(p)
      // Every copy (free pages keep older versions of upserted rows), so the live row is hit too.
      let flipped = 0
      for (let at = bytes.indexOf('child of 5'); at >= 0; at = bytes.indexOf('child of 5', at + 1)) {
        bytes[at + 2] = 0x22 // a quote inside the JSON text
        flipped++
      }
      expect(flipped).toBeGreaterThan(0)
      writeFileSync(p, bytes)
    })
    const result = await readAll(path)
    expect(result.values).toEqual(reference())
    expect(result.hits).toBe(recorded.length - 1)
  })

  it('an unopenable location: reads miss and writes fail softly, never a crash', async () => {
    const blocker = join(dir, 'a-file')
    writeFileSync(blocker, 'not a directory')
    const { createProjectionRegistry } = await import('@dsh/session-projection')
    const { Context } = await import('@dsh/context')
    const warnings: string[] = []
    const cache = new SqliteProjectionCache({
      path: join(blocker, 'projections.sqlite'),
      projections: createProjectionRegistry(new Context()),
      sessions: { flush: async () => {} },
      logger: { warn: (m) => void warnings.push(m), error: (m) => void warnings.push(m) },
    })
    const { header, cut } = recorded[0]!
    expect(cache.cachedSnapshot(header, SessionLogOffset(cut), [])).toBeUndefined()
    expect(warnings.some((w) => /cannot be opened; running without it/.test(w))).toBe(true)
    cache.close()
  })
})
