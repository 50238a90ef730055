import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { SqliteProjectionCache, sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createScriptedDriver, type ExplainedSubagentEntry, explainChildren } from '../src/index.js'
import { bodyReads, completedTurn, createHost, gate, type Host, holdScript } from './helpers.js'

let dir: string
let h: Host | undefined
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-subagent-reads-'))
})
afterEach(async () => {
  await h?.dispose()
  h = undefined
  rmSync(dir, { recursive: true, force: true })
})

function rungCounts(entries: readonly ExplainedSubagentEntry[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const entry of entries) counts[entry.rung] = (counts[entry.rung] ?? 0) + 1
  return counts
}

describe('read counting with 1,000 children (half seeded, half fresh, a third live)', () => {
  it('reads no body with a warm cache, and exactly one body per cold child once the cache file is gone', async () => {
    const cachePath = join(dir, 'projections.sqlite')
    const hold = gate()
    const driver = createScriptedDriver((run) =>
      run.identity?.label?.startsWith('live') ? holdScript(hold.promise) : [{ kind: 'message', text: 'done' }],
    )
    h = await createHost({
      storage: new MemoryPersistenceStorage(),
      driver,
      extra: (ctx) => ctx.activate(sessionProjectionCachePlugin({ path: cachePath, throttle: { events: 100_000, ms: 600_000 } })),
    })
    const host = h
    const parent = host.sessions.create()
    completedTurn(parent, 1)
    const handles = Array.from({ length: 1000 }, (_, i) =>
      host.runtime.spawn(parent, {
        mode: i % 4 < 2 ? 'one-shot' : 'continuable',
        label: i % 3 === 0 ? `live-${i}` : `cold-${i}`,
        context: i % 2 === 0 ? 'fork' : 'fresh',
      }),
    )
    const live = handles.filter((_, i) => i % 3 === 0)
    const cold = handles.filter((_, i) => i % 3 !== 0)
    await Promise.all(cold.map((handle) => handle.done))
    const cache = host.ctx.require('sessionProjectionCache') as SqliteProjectionCache
    await cache.idle()
    expect(live).toHaveLength(334)
    expect(cold).toHaveLength(666)
    expect(cold.filter((c) => c.session.header.isSeeded)).toHaveLength(333)
    expect(live.every((c) => host.sessions.get(c.id) !== undefined)).toBe(true)
    expect(cold.every((c) => host.sessions.get(c.id) === undefined)).toBe(true)

    // Warm cache: live children from the watermark, cold ones (seeded or not) from checkpoints.
    let reads = bodyReads(host)
    const warm = await host.runtime.explainChildren(parent.id)
    expect(bodyReads(host) - reads).toBe(0)
    expect(warm).toHaveLength(1000)
    expect(rungCounts(warm)).toEqual({ 1: 334, 2: 666 })

    // The cache file deleted: a fresh, empty cache at the same path.
    cache.close()
    rmSync(cachePath, { force: true })
    const empty = new SqliteProjectionCache({
      path: cachePath,
      projections: host.projections,
      sessions: host.sessions,
      logger: { warn: () => {}, error: () => {} },
    })
    try {
      const services = {
        sessions: host.sessions,
        sessionProjections: host.projections,
        sessionQuery: host.ctx.require('sessionQuery'),
        sessionProjectionCache: empty,
      }
      reads = bodyReads(host)
      const cold3 = await explainChildren(services, parent.id)
      expect(bodyReads(host) - reads).toBe(666)
      expect(rungCounts(cold3)).toEqual({ 1: 334, 3: 666 })
      // Cost changed, results did not.
      expect(cold3.map((e) => e.row)).toEqual(warm.map((e) => e.row))
    } finally {
      empty.close()
    }
    hold.open()
    await Promise.all(live.map((handle) => handle.done))
  })
})
