import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { defaultIndexPath, sqliteSessionQueryPlugin } from '@dsh/session-query-sqlite'
import { beforeEach, describe, expect, it } from 'vitest'
import { createScriptedDriver } from '../src/index.js'
import { completedTurn, gate, type Host, holdScript, hostsPerTest } from './helpers.js'

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-subagent-files-'))
})
const hosts = hostsPerTest(() => rmSync(root, { recursive: true, force: true }))

/** A process over the session root: zstd JSONL logs, optionally the SQLite index and the checkpoint cache. */
async function open(options: { index?: boolean; cache?: boolean; hold?: Promise<void> } = {}): Promise<Host & { jsonl: JsonlPersistence }> {
  const jsonl = createJsonlPersistence({ root })
  const h = await hosts.open({
    persistence: jsonl,
    ...(options.index ? { query: false as const } : {}),
    driver: createScriptedDriver((run) =>
      options.hold !== undefined && run.identity?.label === 'busy'
        ? holdScript(options.hold)
        : [
            { kind: 'chunk', text: 'hi' },
            { kind: 'message', text: 'hi there' },
          ],
    ),
    extra: async (ctx) => {
      if (options.index) await ctx.activate(sqliteSessionQueryPlugin({ path: defaultIndexPath(root) }))
      if (options.cache) await ctx.activate(sessionProjectionCachePlugin({ root }))
    },
  })
  return Object.assign(h, { jsonl })
}

describe('listing over real files (zstd JSONL, SQLite index, SQLite cache)', () => {
  it('lists the same catalog live, cold with the cache and cold without it, across restarts', async () => {
    const hold = gate()
    const first = await open({ index: true, cache: true, hold: hold.promise })
    const parent = first.sessions.create({ cwd: root })
    completedTurn(parent, 1)
    const a = first.runtime.spawn(parent, { mode: 'one-shot', label: 'scan', context: 'fresh' })
    const b = first.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fork' })
    const busy = first.runtime.spawn(parent, { mode: 'continuable', label: 'busy', context: 'fork' })
    await Promise.all([a.done, b.done])
    const grandchild = first.runtime.spawn(first.sessions.restore(await first.jsonl.load(b.id)), { mode: 'one-shot', context: 'fresh' })
    await grandchild.done
    await first.sessions.dispose(b.id)
    const liveView = await first.runtime.explainChildren(parent.id)
    expect(liveView.map((e) => [e.row.id, e.rung, e.row.kind === 'child' ? e.row.activity : e.row.reason])).toEqual([
      [a.id, 2, 'inactive'],
      [b.id, 2, 'inactive'],
      [busy.id, 1, 'running'],
    ])
    await hosts.close(first) // interrupts the busy child, which settles durably
    expect((await busy.done).reason).toBe('cancelled')

    const expected = [
      { kind: 'child', id: a.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'scan' },
      { kind: 'child', id: b.id, activity: 'inactive', hasChildren: true, mode: 'continuable', label: 'helper' },
      { kind: 'child', id: busy.id, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'busy' },
    ]
    const cached = await open({ index: true, cache: true })
    const withCache = await cached.runtime.explainChildren(parent.id)
    expect(withCache.map((e) => e.row)).toEqual(expected)
    expect(withCache.map((e) => e.rung)).toEqual([2, 2, 2])
    await hosts.close(cached)

    const bare = await open({ index: true })
    const withoutCache = await bare.runtime.explainChildren(parent.id)
    expect(withoutCache.map((e) => e.row)).toEqual(expected)
    expect(withoutCache.map((e) => e.rung)).toEqual([3, 3, 3])
    expect((await bare.runtime.listDescendants(parent.id)).map((r) => r.id)).toEqual([a.id, b.id, grandchild.id, busy.id])
  })

  it('reports a child whose log fails its checksum as unavailable, and lists it again once the bytes are good', async () => {
    const writer = await open()
    const parent = writer.sessions.create()
    const good = writer.runtime.spawn(parent, { mode: 'one-shot', label: 'good', context: 'fresh' })
    const hurt = writer.runtime.spawn(parent, { mode: 'one-shot', label: 'hurt', context: 'fresh' })
    await Promise.all([good.done, hurt.done])
    await hosts.close(writer)

    const path = writer.jsonl.logPath(hurt.id)
    const original = readFileSync(path)
    const flipped = Buffer.from(original)
    flipped[flipped.length - 1]! ^= 0xff // the last batch's CRC trailer
    writeFileSync(path, flipped)
    const reader = await open()
    expect(await reader.runtime.listChildren(parent.id)).toEqual([
      { kind: 'child', id: good.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'good' },
      { kind: 'diagnostic', id: hurt.id, reason: 'unavailable' },
    ])
    writeFileSync(path, original)
    expect(await reader.runtime.listChildren(parent.id)).toEqual([
      { kind: 'child', id: good.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'good' },
      { kind: 'child', id: hurt.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'hurt' },
    ])
  })
})
